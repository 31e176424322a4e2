# syntax=docker/dockerfile:1
# Build: docker build -t replyonce-gateway .
# Run:   docker run -p 8080:8080 -e WEBHOOK_SECRET=whsec_... -e AGENT_URL=http://agent:9000/events \
#          -e GATEWAY_ADMIN_TOKEN=... -v replyonce-data:/var/lib/replyonce replyonce-gateway
#        (or mount your own config over /etc/replyonce/gateway.yaml)
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.Version=${VERSION}" -o /out/gateway ./cmd/gateway
# The data directory, made here because the final image has no shell.
RUN mkdir -p /out/data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/gateway /usr/local/bin/gateway
COPY configs/docker.yaml /etc/replyonce/gateway.yaml
# The bolt ledger lives here (store.path data/ledger.db, relative to the
# working directory). It must belong to the user the gateway runs as:
# WORKDIR alone would create it owned by root, and a fresh named volume
# takes the ownership of the directory it is mounted on.
COPY --from=build --chown=65532:65532 /out/data /var/lib/replyonce
USER 65532:65532
WORKDIR /var/lib/replyonce
EXPOSE 8080 8081
HEALTHCHECK --interval=10s --timeout=5s --start-period=5s CMD ["/usr/local/bin/gateway", "health"]
ENTRYPOINT ["/usr/local/bin/gateway"]
CMD ["serve", "--config", "/etc/replyonce/gateway.yaml"]
