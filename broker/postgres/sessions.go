package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/conveyor-dev/conveyor/broker"
)

// This file is the registry of worker sessions (broker.SessionRegistry),
// the table conveyor_sessions: each node records its own under its node
// id, and any node lists them all. Its rows reference the node's row, so
// that the leader's delete of a dead node takes its sessions along.

var _ broker.SessionRegistry = (*Engine)(nil)

// OpenSession records a session of this node; see broker.SessionRegistry.
func (e *Engine) OpenSession(ctx context.Context, s broker.SessionInfo) error {
	if err := e.checkOpen(); err != nil {
		return err
	}
	node, err := e.sessionNode(ctx)
	if err != nil {
		return err
	}
	queues, labels := s.Queues, s.Labels
	if queues == nil {
		queues = map[string]int32{}
	}
	if labels == nil {
		labels = map[string]string{}
	}
	_, err = e.pool.Exec(ctx, `INSERT INTO conveyor_sessions
			(id, node, queues, concurrency, in_flight, labels, sdk_version, batch_types, connected_at, last_heartbeat,
			 types, release_id, start_authorization)
		VALUES ($1, $2, $3, $4, $5, $6, $7, coalesce($8::text[], '{}'), $9, $10, coalesce($11::text[], '{}'), $12, $13)
		ON CONFLICT (id) DO UPDATE SET node = excluded.node, queues = excluded.queues,
			concurrency = excluded.concurrency, in_flight = excluded.in_flight, labels = excluded.labels,
			sdk_version = excluded.sdk_version, batch_types = excluded.batch_types,
			connected_at = excluded.connected_at, last_heartbeat = excluded.last_heartbeat,
			types = excluded.types, release_id = excluded.release_id, start_authorization = excluded.start_authorization`,
		s.ID, node, queues, s.Concurrency, s.InFlight, labels, s.SDKVersion, s.BatchTypes,
		nanos(s.ConnectedAt), nanos(s.LastHeartbeat), s.Types, s.ReleaseID, s.StartAuthorization)
	if err != nil {
		return fmt.Errorf("record session %s: %w", s.ID, e.storageError(err))
	}
	return nil
}

// CloseSession forgets a session of this node; see broker.SessionRegistry.
func (e *Engine) CloseSession(ctx context.Context, id string) error {
	if err := e.checkOpen(); err != nil {
		return err
	}
	node, err := e.sessionNode(ctx)
	if err != nil {
		return err
	}
	if _, err := e.pool.Exec(ctx, `DELETE FROM conveyor_sessions WHERE id = $1 AND node = $2`, id, node); err != nil {
		return fmt.Errorf("forget session %s: %w", id, e.storageError(err))
	}
	return nil
}

// UpdateSessions records the loads of this node's sessions, in one
// statement, forgets its sessions not among them, and returns the ids of
// those not recorded; see broker.SessionRegistry.
func (e *Engine) UpdateSessions(ctx context.Context, loads []broker.SessionLoad) ([]string, error) {
	if err := e.checkOpen(); err != nil {
		return nil, err
	}
	node, err := e.sessionNode(ctx)
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(loads))
	inFlight := make([]int32, len(loads))
	beats := make([]int64, len(loads))
	for i, l := range loads {
		ids[i], inFlight[i], beats[i] = l.ID, l.InFlight, nanos(l.LastHeartbeat)
	}
	// The delete and the update see one snapshot and touch other rows: the
	// node's writes are serialized, so no open of its own races them.
	rows, err := e.pool.Query(ctx, `WITH l AS (
			SELECT * FROM unnest($2::text[], $3::int[], $4::bigint[]) AS l(id, in_flight, last_heartbeat)
		), gone AS (
			DELETE FROM conveyor_sessions s WHERE s.node = $1 AND NOT s.id = ANY($2::text[])
		)
		UPDATE conveyor_sessions s SET in_flight = l.in_flight, last_heartbeat = l.last_heartbeat
		FROM l WHERE s.id = l.id AND s.node = $1
		RETURNING s.id`, node, ids, inFlight, beats)
	if err != nil {
		return nil, fmt.Errorf("record session loads: %w", e.storageError(err))
	}
	found, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("record session loads: %w", e.storageError(err))
	}
	recorded := make(map[string]struct{}, len(found))
	for _, id := range found {
		recorded[id] = struct{}{}
	}
	var missing []string
	for _, id := range ids {
		if _, ok := recorded[id]; !ok {
			missing = append(missing, id)
		}
	}
	return missing, nil
}

// Sessions lists every node's sessions, with the tasks each holds ACTIVE
// now; see broker.SessionRegistry. It reads the ACTIVE tasks once, by
// their partial index, not once per session.
func (e *Engine) Sessions(ctx context.Context) ([]broker.SessionInfo, error) {
	if err := e.checkOpen(); err != nil {
		return nil, err
	}
	rows, err := e.pool.Query(ctx, `SELECT s.id, s.node, s.queues, s.concurrency, s.in_flight, s.labels,
			s.sdk_version, s.batch_types, s.connected_at, s.last_heartbeat, coalesce(t.ids, '{}'),
			s.types, s.release_id, s.start_authorization
		FROM conveyor_sessions s
		JOIN conveyor_nodes n ON n.id = s.node AND n.last_seen >= now() - $1::interval
		LEFT JOIN (
			SELECT lease_session, array_agg(id ORDER BY id) AS ids FROM conveyor_tasks
			WHERE state = 3 GROUP BY lease_session
		) t ON t.lease_session = s.id
		ORDER BY s.id`, e.cfg.Liveness)
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", e.storageError(err))
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (broker.SessionInfo, error) {
		var s broker.SessionInfo
		var connected, beat int64
		err := row.Scan(&s.ID, &s.Node, &s.Queues, &s.Concurrency, &s.InFlight, &s.Labels,
			&s.SDKVersion, &s.BatchTypes, &connected, &beat, &s.TaskIDs, &s.Types, &s.ReleaseID, &s.StartAuthorization)
		s.ConnectedAt, s.LastHeartbeat = fromNanos(connected), fromNanos(beat)
		return s, err
	})
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", e.storageError(err))
	}
	return out, nil
}

// sessionNode is the node id this engine records its sessions under: its
// row in conveyor_nodes exists from Open on (cluster.go).
func (e *Engine) sessionNode(context.Context) (string, error) { return e.NodeID(), nil }
