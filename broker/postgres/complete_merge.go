package postgres

import (
	"context"
	"errors"
	"sync"

	"github.com/conveyor-dev/conveyor/broker"
)

// resultMerger applies the concurrent CompleteBatch calls of a node's
// sessions in one transaction where it can. Each session applies its
// Results one batch at a time, so with several workers on one queue the
// node commits as many small transactions at once as it has sessions, and
// a transaction costs the database more than the rows in it (fsync and
// WAL locks: docs/benchmarks.md, the fifteenth pass). A call that arrives
// while another's transaction runs waits, and the calls that waited run
// together next, as a group commit does: one call alone runs at once.
type resultMerger struct {
	mu      sync.Mutex
	running bool
	waiting []*resultCall
}

// resultCall is one CompleteBatch call: its decisions, then its answer.
// lead is sent true when the call is to run the next transaction for the
// calls waiting, false when another ran it and out and err are its
// answer.
type resultCall struct {
	ds   []broker.Decision
	out  []broker.Completion
	err  error
	lead chan bool
}

// CompleteBatch applies decisions about leased tasks in one transaction,
// shared with the calls that arrived while the last one ran; see
// broker.Broker. A call that waits for another's transaction is not cut
// short by its ctx (a session passes one without cancellation), and a
// shared transaction runs without the leader's cancellation.
func (e *Engine) CompleteBatch(ctx context.Context, ds []broker.Decision) ([]broker.Completion, error) {
	m := &e.results
	c := &resultCall{ds: ds, lead: make(chan bool, 1)}
	m.mu.Lock()
	if m.running {
		m.waiting = append(m.waiting, c)
		m.mu.Unlock()
		if !<-c.lead {
			return c.out, c.err
		}
		m.mu.Lock()
	}
	m.running = true
	calls := append([]*resultCall{c}, m.waiting...)
	m.waiting = nil
	m.mu.Unlock()

	e.applyMerged(ctx, calls)

	m.mu.Lock()
	if len(m.waiting) > 0 {
		next := m.waiting[0]
		m.waiting = m.waiting[1:]
		next.lead <- true // it takes the others with it
	} else {
		m.running = false
	}
	m.mu.Unlock()
	for _, o := range calls[1:] {
		o.lead <- false
	}
	return c.out, c.err
}

// applyMerged applies calls' decisions in one transaction and gives each
// call its part of the answer. A transaction that fails for another
// reason than the store being out of reach is tried again call by call,
// so that what one call's decisions did wrong fails that call alone.
func (e *Engine) applyMerged(ctx context.Context, calls []*resultCall) {
	if len(calls) == 1 {
		calls[0].out, calls[0].err = e.completeBatch(ctx, calls[0].ds)
		return
	}
	var all []broker.Decision
	for _, c := range calls {
		all = append(all, c.ds...)
	}
	// The transaction is every call's: the leader's end must not cut it.
	out, err := e.completeBatch(context.WithoutCancel(ctx), all)
	switch {
	case err == nil:
		for _, c := range calls {
			c.out, out = out[:len(c.ds):len(c.ds)], out[len(c.ds):]
		}
	case errors.Is(err, broker.ErrUnavailable):
		for _, c := range calls {
			c.err = err
		}
	default:
		for _, c := range calls {
			c.out, c.err = e.completeBatch(context.WithoutCancel(ctx), c.ds)
		}
	}
}
