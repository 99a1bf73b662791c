package postgres

import (
	"context"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
)

// OldestReady probes the head of the queue's ready line at each priority
// (1..9, the protocol's range): nine index lookups, not a scan. due_at of
// a PENDING task is when it became ready; see broker.LatencyReporter.
func (e *Engine) OldestReady(ctx context.Context, queue string, _ time.Time) (time.Time, error) {
	if err := e.checkOpen(); err != nil {
		return time.Time{}, err
	}
	var oldest *int64
	err := e.pool.QueryRow(ctx, `SELECT min(h.due_at) FROM generate_series(1, 9) AS p(prio)
		CROSS JOIN LATERAL (SELECT due_at FROM conveyor_tasks
			WHERE queue = $1 AND state = 2 AND NOT held AND priority = p.prio
			ORDER BY ready_seq LIMIT 1) AS h`, queue).Scan(&oldest)
	if err != nil {
		return time.Time{}, e.storageError(err)
	}
	if oldest == nil || *oldest == 0 {
		return time.Time{}, nil
	}
	return time.Unix(0, *oldest).UTC(), nil
}

var _ broker.LatencyReporter = (*Engine)(nil)
