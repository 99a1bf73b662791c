package server

// Version is the semver of this build, reported in Welcome, GetClusterInfo
// and by `conveyor version`. Release builds set it with
//
//	go build -ldflags "-X github.com/conveyor-dev/conveyor/server.Version=v1.2.3"
var Version = "v0.1.0"

// MinSDKVersion is the oldest worker SDK version the server admits. It is
// vacuous (admits everything) until a wire change leaves older SDKs behind.
const MinSDKVersion = "v0.0.0-0"
