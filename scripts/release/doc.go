// Command release builds the gateway's release archives: one binary per
// platform the gateway ships for (Linux, macOS and Windows, each on amd64
// and arm64), with the version stamped into `gateway version`.
//
//	go run ./scripts/release -version v0.3.0             # all six, into dist/
//	go run ./scripts/release -version v0.3.0 -targets linux/arm64 -out /tmp/rel
//
// Each binary is built the way the Dockerfile builds the image's: plain
// `go build` with CGO_ENABLED=0 (no C toolchain per target), -trimpath (no
// build machine paths in the binary, so two machines build the same
// bytes) and -ldflags "-s -w -X main.Version=VERSION". It is packed with
// LICENSE and README.md as gateway_VERSION_OS_ARCH.tar.gz (.zip for
// Windows, with gateway.exe), and SHA256SUMS lists every archive.
//
// It runs with Go alone, on any of the three systems: no goreleaser (not
// available as an approved release where this project is built), no
// shell. The nested modules' release (tags, not binaries) is described in
// docs/toolkit.md; its test (TestNestedModulesResolveThroughAProxy)
// resolves each of them alone through a file-based module proxy.
package main
