package postgres

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// This file stands in for the node membership of several nodes
// (conveyor_nodes: registration, heartbeat, the leader's sweep), which is
// built apart. It gives the engine an id and a row of conveyor_nodes for
// its sessions to reference. When the membership lands it goes: NodeID is
// the membership's, and sessionNode returns it (the node's row exists from
// Open on).

// nodeStandIn is this engine's node id and whether its row is written.
type nodeStandIn struct {
	once sync.Once
	id   string

	mu      sync.Mutex
	written bool
}

// NodeID is this node's id: generated on first use, fixed for the
// engine's life.
func (e *Engine) NodeID() string {
	e.node.once.Do(func() { e.node.id = "n" + e.ids.next(time.Now()) })
	return e.node.id
}

// sessionNode is the node id this engine records its sessions under,
// writing the node's row the first time.
func (e *Engine) sessionNode(ctx context.Context) (string, error) {
	id := e.NodeID()
	e.node.mu.Lock()
	defer e.node.mu.Unlock()
	if e.node.written {
		return id, nil
	}
	if _, err := e.pool.Exec(ctx, `INSERT INTO conveyor_nodes (id, address, version) VALUES ($1, '', '')
		ON CONFLICT (id) DO NOTHING`, id); err != nil {
		return "", fmt.Errorf("register node %s: %w", id, e.storageError(err))
	}
	e.node.written = true
	return id, nil
}
