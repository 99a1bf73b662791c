package postgres

import (
	"context"
	"sync"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
)

// storageHealth is whether the database answers: a call that could not
// reach it marks it down, one that did marks it up. StorageError asks it
// again, at most once per healthProbeEvery, so that a health check of an
// idle server learns of an outage too.
type storageHealth struct {
	mu     sync.Mutex
	err    error
	probed time.Time
}

// healthProbeEvery bounds how often StorageError pings the database.
const healthProbeEvery = time.Second

func (h *storageHealth) failed(err error) {
	h.mu.Lock()
	h.err = err
	h.mu.Unlock()
}

func (h *storageHealth) ok() {
	h.mu.Lock()
	h.err = nil
	h.mu.Unlock()
}

// StorageError reports the database unreachable (nil: it answers), for
// the health check and the metrics (broker.StorageHealth).
func (e *Engine) StorageError() error {
	e.health.mu.Lock()
	due := time.Since(e.health.probed) >= healthProbeEvery
	if due {
		e.health.probed = time.Now()
	}
	err := e.health.err
	e.health.mu.Unlock()
	if !due || e.isClosed() {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), healthProbeTimeout)
	defer cancel()
	if perr := e.pool.Ping(ctx); perr != nil {
		e.health.failed(perr)
		return perr
	}
	e.health.ok()
	return nil
}

// healthProbeTimeout bounds one ping of the database.
const healthProbeTimeout = 2 * time.Second

// DatabaseStats reports what the engine's tables take and the database's
// estimates of their live and dead rows; see broker.DatabaseStater.
func (e *Engine) DatabaseStats(ctx context.Context) (broker.DatabaseStats, error) {
	if err := e.checkOpen(); err != nil {
		return broker.DatabaseStats{}, err
	}
	var st broker.DatabaseStats
	err := e.pool.QueryRow(ctx, `SELECT
			coalesce((SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
				WHERE n.nspname = current_schema() AND c.relkind = 'r' AND c.relname LIKE 'conveyor\_%'), 0)::bigint,
			coalesce(sum(n_live_tup), 0)::bigint, coalesce(sum(n_dead_tup), 0)::bigint
		FROM pg_stat_user_tables WHERE schemaname = current_schema() AND relname LIKE 'conveyor\_%'`).Scan(
		&st.SizeBytes, &st.LiveTuples, &st.DeadTuples)
	return st, e.storageError(err)
}
