// Package buildinfo holds the build's version, shared by the server (which
// reports it in Welcome and GetClusterInfo), the CLI and the Go SDK's
// default sdk_version.
package buildinfo

// Version is the semver of this build. Release builds set it with
//
//	go build -ldflags "-X github.com/conveyor-dev/conveyor/internal/buildinfo.Version=v1.2.3"
var Version = "v0.1.0"

// MinSDKVersion is the oldest worker SDK version the server admits. It is
// vacuous (admits everything) until a wire change leaves older SDKs behind.
const MinSDKVersion = "v0.0.0-0"
