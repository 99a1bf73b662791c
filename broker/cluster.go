package broker

import (
	"context"
	"time"
)

// Clustered is an engine several server processes (nodes) may share: the
// PostgreSQL engine. Each node registers with a heartbeat; one of them at
// a time is the leader, under a term no other node holds, and runs the
// jobs that must run once (promotion of due tasks, purges, cron, sweeping
// the leases of dead nodes). See doc.go, "Several nodes".
type Clustered interface {
	// NodeID is this node's identity now. It changes when the node was
	// cut off from the others long enough to be declared dead and
	// rejoins.
	NodeID() string
	// Nodes lists the live nodes, this one included, ordered by id.
	Nodes(ctx context.Context) ([]Node, error)
	// Leading reports whether this node holds the leadership now, and
	// returns a channel closed at the next change of it.
	Leading() (leading bool, changed <-chan struct{})
}

// Node describes one live node.
type Node struct {
	// ID identifies the node for as long as it stays live.
	ID string
	// Address is where it serves (its advertised address).
	Address string
	// Version is its build version.
	Version string
	// StartedAt is when it joined; LastSeen its last heartbeat, on the
	// database's clock.
	StartedAt, LastSeen time.Time
	// Leader is set on the node holding the leadership.
	Leader bool
}

// RunningCanceler is a Notifier that can be told of a running task an
// operator canceled through another node: the session holding it, if it is
// on this node, tells its worker.
type RunningCanceler interface {
	RunningCanceled(l LapsedLease)
}
