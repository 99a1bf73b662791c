package postgres

import (
	"context"
	"sync"
	"time"
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
