package sessions

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
)

// registrySyncEvery is how often a node writes the loads of its sessions
// (in-flight counts, last heartbeats) to an engine's session registry, in
// one statement: often enough for a listing read by people, seldom enough
// that the writes cost the database nothing next to the tasks'.
const registrySyncEvery = 5 * time.Second

// registryWriteTimeout bounds one write to the registry.
const registryWriteTimeout = 5 * time.Second

// registryWriter records this node's worker sessions in an engine's
// session registry (broker.SessionRegistry), so that every node's
// ListWorkers lists them. It writes from a goroutine of its own, in order:
// a session's open and close are queued (never waited for: a database
// down must not hold a session up), and a timer writes the loads. A write
// that fails is logged and mends itself: the next loads' write forgets the
// sessions whose close was lost and reports those whose open was, which
// are opened again.
type registryWriter struct {
	reg   broker.SessionRegistry
	hub   *Hub
	log   *slog.Logger
	every time.Duration

	mu      sync.Mutex
	pending []registryOp
	started bool
	stopped bool

	wake chan struct{}
	stop chan struct{}
	done chan struct{}
	// abort cuts the writes still running when Stop's context ends.
	abortCtx context.Context
	abort    context.CancelFunc
	stopOnce sync.Once

	// owed is set while the registry may hold sessions of this node that
	// the next loads' write must account for (only run uses it).
	owed bool
}

// registryOp is a session's open (info set) or close.
type registryOp struct {
	id   string
	info *broker.SessionInfo
}

func newRegistryWriter(reg broker.SessionRegistry, h *Hub, log *slog.Logger) *registryWriter {
	w := &registryWriter{reg: reg, hub: h, log: log, every: registrySyncEvery,
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	w.abortCtx, w.abort = context.WithCancel(context.Background())
	return w
}

// opened queues the record of a session that opened.
func (w *registryWriter) opened(info broker.SessionInfo) {
	w.queue(registryOp{id: info.ID, info: &info})
}

// closed queues forgetting a session that ended.
func (w *registryWriter) closed(id string) { w.queue(registryOp{id: id}) }

func (w *registryWriter) queue(op registryOp) {
	w.mu.Lock()
	if !w.stopped {
		w.pending = append(w.pending, op)
	}
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Start runs the writer.
func (w *registryWriter) Start(context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.started && !w.stopped {
		w.started = true
		go w.run()
	}
	return nil
}

// Stop writes what is queued (the closes of the sessions that just
// ended), bounded by ctx, and stops the writer. It is idempotent.
func (w *registryWriter) Stop(ctx context.Context) error {
	w.mu.Lock()
	started := w.started
	w.stopped = true // queue nothing more
	w.mu.Unlock()
	if !started {
		return nil
	}
	w.stopOnce.Do(func() { close(w.stop) })
	select {
	case <-w.done:
		return nil
	case <-ctx.Done():
		w.abort()
		<-w.done
		return ctx.Err()
	}
}

func (w *registryWriter) run() {
	defer close(w.done)
	defer w.abort()
	tick := time.NewTicker(w.every)
	defer tick.Stop()
	for {
		select {
		case <-w.wake:
			w.flush()
		case <-tick.C:
			w.flush()
			w.syncLoads()
			w.hub.refreshReleases()
		case <-w.stop:
			w.flush()
			return
		}
	}
}

// flush writes the queued opens and closes, in order. A session that
// opened and closed since the last flush is not written at all.
func (w *registryWriter) flush() {
	w.mu.Lock()
	ops := w.pending
	w.pending = nil
	w.mu.Unlock()
	closed := map[string]bool{}
	for _, op := range ops {
		if op.info == nil {
			closed[op.id] = true
		}
	}
	var failed int
	var firstErr error
	for _, op := range ops {
		var err error
		switch {
		case op.info != nil && closed[op.id]:
			continue // opened and closed since the last flush
		case op.info != nil:
			err = w.write(func(ctx context.Context) error { return w.reg.OpenSession(ctx, *op.info) })
		default:
			err = w.write(func(ctx context.Context) error { return w.reg.CloseSession(ctx, op.id) })
		}
		w.owed = true
		if err != nil {
			failed++
			firstErr = err
		}
	}
	if failed > 0 {
		w.log.Warn("record worker sessions in the registry: other nodes may list them late", "failed", failed, "err", firstErr)
	}
}

// syncLoads writes the loads of this node's sessions, and opens again
// those the registry lacks.
func (w *registryWriter) syncLoads() {
	loads := w.hub.loads()
	if len(loads) == 0 && !w.owed {
		return // an idle node writes nothing
	}
	var missing []string
	err := w.write(func(ctx context.Context) (err error) {
		missing, err = w.reg.UpdateSessions(ctx, loads)
		return err
	})
	if err != nil {
		w.log.Warn("record the loads of worker sessions in the registry", "sessions", len(loads), "err", err)
		w.owed = true
		return
	}
	w.owed = len(loads) > 0
	for _, id := range missing {
		info, ok := w.hub.registryInfo(id)
		if !ok {
			continue // it ended meanwhile
		}
		if err := w.write(func(ctx context.Context) error { return w.reg.OpenSession(ctx, info) }); err != nil {
			w.log.Warn("record a worker session in the registry again", "session", id, "err", err)
		}
	}
}

// write runs one registry write, bounded by registryWriteTimeout.
func (w *registryWriter) write(fn func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(w.abortCtx, registryWriteTimeout)
	defer cancel()
	return fn(ctx)
}
