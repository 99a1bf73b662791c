package broker

import (
	"context"
	"time"
)

// SessionRegistry is an engine several nodes share (see Clustered) that
// records the worker sessions of every node, so that any node can list
// them all. Each node writes only its own sessions, under its node id, and
// serializes its writes (one writer per node): the engine relies on it
// (see UpdateSessions). The registry is a listing, not a lock: nothing
// that decides what runs reads it, and a write that fails loses nothing
// but an entry of the listing until the node's next UpdateSessions.
// Sessions of a node declared dead go with it.
type SessionRegistry interface {
	// OpenSession records a session of this node (its Node is ignored:
	// the engine writes its own node id). Recording one already recorded
	// replaces it.
	OpenSession(ctx context.Context, s SessionInfo) error
	// CloseSession forgets a session of this node. Forgetting one not
	// recorded is not an error.
	CloseSession(ctx context.Context, id string) error
	// UpdateSessions records the load of this node's sessions: loads are
	// all of them, so any other session recorded for this node is
	// forgotten (a close whose write failed). It returns the ids of loads
	// not recorded (an open whose write failed, or sessions the node lost
	// when it was declared dead and rejoined): open them again.
	UpdateSessions(ctx context.Context, loads []SessionLoad) (missing []string, err error)
	// Sessions lists the recorded sessions of every live node, ordered by
	// id. Their TaskIDs are the tasks each holds ACTIVE now; their
	// InFlight and LastHeartbeat are as of their node's last
	// UpdateSessions.
	Sessions(ctx context.Context) ([]SessionInfo, error)
}

// SessionInfo describes one worker session: what its Hello declared, and
// its load.
type SessionInfo struct {
	// ID is the session's id (a ULID, unique across nodes).
	ID string
	// Node is the id of the node the session is on.
	Node string
	// Queues are the queues it serves and their weights.
	Queues map[string]int32
	// Concurrency is its declared concurrency.
	Concurrency int32
	// InFlight counts its deliveries not answered yet.
	InFlight int32
	// Labels are the worker's labels.
	Labels map[string]string
	// SDKVersion is the worker's SDK version.
	SDKVersion string
	// BatchTypes are the task types it handles as batches.
	BatchTypes []string
	// Types are the task types it has handlers for (empty: every type),
	// ReleaseID its release (empty: unversioned), and StartAuthorization
	// whether it asks before it starts an at-most-once task.
	Types              []string
	ReleaseID          string
	StartAuthorization bool
	// TaskIDs are the tasks it holds, in id order.
	TaskIDs []string
	// ConnectedAt is when it opened; LastHeartbeat when its latest
	// heartbeat arrived (zero: none yet).
	ConnectedAt, LastHeartbeat time.Time
}

// SessionLoad is the part of a session that changes while it runs.
type SessionLoad struct {
	// ID is the session's id.
	ID string
	// InFlight counts its deliveries not answered yet.
	InFlight int32
	// LastHeartbeat is when its latest heartbeat arrived (zero: none yet).
	LastHeartbeat time.Time
}
