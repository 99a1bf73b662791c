package server

import "github.com/conveyor-dev/conveyor/broker"

// nodeIdentity is an engine several nodes share, which knows this node's
// id (broker.Clustered names it too).
type nodeIdentity interface {
	NodeID() string
}

// nodeID is this node's id on an engine several nodes share, "" on one
// the server has to itself (the embedded engine).
func nodeID(b broker.Broker) string {
	if n, ok := b.(nodeIdentity); ok {
		return n.NodeID()
	}
	return ""
}
