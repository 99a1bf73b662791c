// Package wire holds the rules the server applies at its edge that both
// the services (package server) and the worker sessions (server/sessions)
// apply, so that each is written once: the bounds on what clients send
// (limits.go; docs/protocol.md lists them), the bounds on what an error
// message echoes back (message.go), the mapping of broker errors to the
// protocol's codes (errors.go), the queue-name rule (names.go) and the
// conversions of the broker's task to the wire's that both use
// (convert.go). It imports only the broker contract and the generated
// wire types.
package wire
