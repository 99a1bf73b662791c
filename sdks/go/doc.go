// Package conveyor is the Go SDK for Conveyor: a Client that enqueues and
// inspects tasks, and a Worker that holds a session with the server and
// runs handlers for the tasks it is sent.
//
// Both speak ConnectRPC to one server address. Plain http:// addresses use
// HTTP/2 without TLS (h2c); https:// addresses negotiate HTTP/2 over TLS.
// The gRPC protocol is the default; WithProtocol selects gRPC-Web or the
// Connect protocol (HTTP/JSON-friendly) for the Client. A Worker's session
// is a bidirectional stream and needs gRPC or Connect.
//
// The SDK imports only the generated API, connect and protobuf: never the
// server's packages.
package conveyor
