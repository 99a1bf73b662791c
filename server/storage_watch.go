package server

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
)

// storageWatchEvery is how often the storage's health is asked (a
// PostgreSQL engine pings its database at most once a second; the
// embedded one answers from memory).
const storageWatchEvery = 2 * time.Second

// storageWatch follows an engine's storage health into the health
// service: while the store cannot be reached (or refuses writes), every
// service reports NOT_SERVING. A dead database sends no signal, so it is
// asked on a timer; the question costs at most one round trip.
type storageWatch struct {
	engine broker.StorageHealth
	health *health
	log    *slog.Logger
	stop   context.CancelFunc
	done   sync.WaitGroup
}

func newStorageWatch(engine broker.StorageHealth, h *health, log *slog.Logger) *storageWatch {
	return &storageWatch{engine: engine, health: h, log: log}
}

// Start starts watching; it returns at once.
func (w *storageWatch) Start(ctx context.Context) error {
	ctx, w.stop = context.WithCancel(context.WithoutCancel(ctx))
	w.done.Go(func() { w.run(ctx) })
	return nil
}

func (w *storageWatch) run(ctx context.Context) {
	t := time.NewTicker(storageWatchEvery)
	defer t.Stop()
	healthy := true
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		err := w.engine.StorageError()
		if (err == nil) == healthy {
			continue
		}
		healthy = err == nil
		if healthy {
			w.log.Info("the storage answers again: serving")
		} else {
			w.log.Error("the storage cannot be reached: not serving until it answers", "err", err)
		}
		w.health.setStorage(healthy)
	}
}

// Stop stops watching. It is idempotent.
func (w *storageWatch) Stop(context.Context) error {
	if w.stop != nil {
		w.stop()
	}
	w.done.Wait()
	return nil
}
