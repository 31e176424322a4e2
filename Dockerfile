# syntax=docker/dockerfile:1
# Build: docker build -t replyonce-gateway .
# Run:   docker run -p 8080:8080 -v $PWD/gateway.yaml:/etc/replyonce/gateway.yaml:ro \
#          -v replyonce-data:/var/lib/replyonce replyonce-gateway
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.Version=${VERSION}" -o /out/gateway ./cmd/gateway

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/gateway /usr/local/bin/gateway
# The bolt ledger lives here when store.path points into it; mount a volume.
WORKDIR /var/lib/replyonce
USER nonroot:nonroot
EXPOSE 8080 8081
ENTRYPOINT ["/usr/local/bin/gateway"]
CMD ["serve", "--config", "/etc/replyonce/gateway.yaml"]
