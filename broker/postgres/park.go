package postgres

import (
	"context"
	"errors"
	"slices"
	"sync"

	"github.com/conveyor-dev/conveyor/broker"
)

// Each session of this node parks a lease (broker.LeaseParker) and
// offers it the free slots it is not leasing for itself; each enqueue
// here that makes tasks it takes ready claims some of them and leases in
// the enqueue's own transaction, by the rules every Lease follows
// (leaseFor), after the enqueue's rows went in. Otherwise, at a steady
// trickle of enqueues, each task costs a lease transaction of its own,
// begun only once the enqueue's commit woke the session: W4's tail was
// that transaction waiting for a core (docs/benchmarks.md, the
// eighteenth and nineteenth passes).
//
// A capped or paused queue, and a task that is not ready when it goes in
// (scheduled, blocked, grouped), claims nothing: their sessions lease as
// before, when TasksReady wakes them. The tasks an enqueue's lease takes
// are counted ready and reserved as it reserves them (txn.ownFirst), so
// that the hints never count them dispatchable to another lease before
// they are visible to it.

// parkedLeases are the leases this node's sessions parked, by queue and
// session: one per session, dropped once it is closed.
type parkedLeases struct {
	mu      sync.Mutex
	byQueue map[string]map[string]*broker.ParkedLease
}

// ParkLease parks pl on each queue it picks from; see broker.LeaseParker.
func (e *Engine) ParkLease(pl *broker.ParkedLease) {
	e.parked.mu.Lock()
	defer e.parked.mu.Unlock()
	if e.parked.byQueue == nil {
		e.parked.byQueue = map[string]map[string]*broker.ParkedLease{}
	}
	for _, pick := range pl.Params.Picks {
		m := e.parked.byQueue[pick.Queue]
		if m == nil {
			m = map[string]*broker.ParkedLease{}
			e.parked.byQueue[pick.Queue] = m
		}
		m[pl.Params.SessionID] = pl
	}
}

// UnparkLease drops pl from every queue it is parked on; see
// broker.LeaseParker.
func (e *Engine) UnparkLease(pl *broker.ParkedLease) {
	e.parked.mu.Lock()
	defer e.parked.mu.Unlock()
	for _, pick := range pl.Params.Picks {
		m := e.parked.byQueue[pick.Queue]
		if m[pl.Params.SessionID] == pl {
			delete(m, pl.Params.SessionID)
		}
		if len(m) == 0 {
			delete(e.parked.byQueue, pick.Queue)
		}
	}
}

// readyKinds are the kinds of the tasks of one queue that an enqueue
// makes ready, and how many.
type readyKinds struct {
	kinds []broker.Kind
	n     int
}

// readyByQueue counts, per queue, the tasks that go in ready, and their
// kinds.
func readyByQueue(tasks []broker.NewTask) map[string]*readyKinds {
	var out map[string]*readyKinds
	for i := range tasks {
		nt := &tasks[i]
		if nt.State != broker.StatePending {
			continue
		}
		if out == nil {
			out = map[string]*readyKinds{}
		}
		r := out[nt.Queue]
		if r == nil {
			r = &readyKinds{}
			out[nt.Queue] = r
		}
		r.n++
		if k := (broker.Kind{Type: nt.Type, AtMostOnce: nt.AtMostOnce}); !slices.Contains(r.kinds, k) {
			r.kinds = append(r.kinds, k)
		}
	}
	return out
}

// claimParked claims, for the tasks an enqueue makes ready, open slots
// of the parked leases of their queues whose route takes one of them:
// per queue, in no set order, as many as the queue's new tasks. Each
// claim picks from that queue only, as of now; what it leaves is there
// for the enqueues that come meanwhile. A closed lease is dropped.
func (e *Engine) claimParked(p broker.EnqueueParams) []*parkedCall {
	e.parked.mu.Lock()
	empty := len(e.parked.byQueue) == 0
	e.parked.mu.Unlock()
	if empty {
		return nil
	}
	var out []*parkedCall
	for queue, r := range readyByQueue(p.Tasks) {
		if e.queueCapped(queue) || e.queuePaused(queue) {
			continue
		}
		out = e.claimQueue(queue, r, p, out)
	}
	return out
}

// claimQueue claims the parked leases of queue for r, appending them to
// out.
func (e *Engine) claimQueue(queue string, r *readyKinds, p broker.EnqueueParams, out []*parkedCall) []*parkedCall {
	e.parked.mu.Lock()
	defer e.parked.mu.Unlock()
	m := e.parked.byQueue[queue]
	left := r.n
	for id, pl := range m {
		if left <= 0 {
			break
		}
		if !slices.ContainsFunc(r.kinds, func(k broker.Kind) bool { return pl.Params.Route.Takes(k.Type, k.AtMostOnce) }) {
			continue
		}
		c, closed := pl.Claim(left)
		if closed {
			delete(m, id)
		}
		if c.N == 0 {
			continue
		}
		lp := pl.Params
		lp.Picks, lp.Now = []broker.QueuePick{{Queue: queue, N: c.N}}, p.Now
		out = append(out, &parkedCall{parked: pl, claim: c, call: &leaseCall{p: lp}})
		left -= c.N
	}
	if len(m) == 0 {
		delete(e.parked.byQueue, queue)
	}
	return out
}

// parkedCall is a parked lease an enqueue claimed, as a Lease call of its
// transaction.
type parkedCall struct {
	parked *broker.ParkedLease
	claim  broker.Claim
	call   *leaseCall
}

// parkedLeasing is the part of an enqueue that leases to the parked
// sessions it claimed.
type parkedLeasing struct {
	calls  []*parkedCall
	groups []*pickGroup
}

// lease leases, in t, what the claimed leases ask for: after the
// enqueue's rows went in, so that they are in the line it walks.
func (pk *parkedLeasing) lease(ctx context.Context, t *txn) (err error) {
	if len(pk.calls) == 0 {
		return nil
	}
	calls := make([]*leaseCall, len(pk.calls))
	for i, c := range pk.calls {
		c.call.out, c.call.err = nil, nil
		calls[i] = c.call
	}
	pk.groups, err = t.leaseFor(ctx, calls)
	return err
}

// settle hands each claimed lease what the enqueue's transaction granted
// it once that ended (err: it failed, and they have none).
func (pk *parkedLeasing) settle(e *Engine, err error) {
	if len(pk.calls) == 0 {
		return
	}
	calls := make([]*leaseCall, len(pk.calls))
	for i, c := range pk.calls {
		calls[i] = c.call
	}
	e.leased(calls, pk.groups, err)
	for _, c := range pk.calls {
		c.parked.Settle(c.claim, c.call.out)
	}
}

// enqueueParked runs an enqueue's transaction, fn, and then leases in it
// what the parked leases its ready tasks claim ask for. Should that lease
// fail other than for the database being out of reach, the claims
// settle with nothing and the enqueue runs again without them (its
// transaction was rolled back): a producer's enqueue does not fail for
// the workers' lease.
func (e *Engine) enqueueParked(ctx context.Context, p broker.EnqueueParams, fn func(t *txn) error) error {
	pk := parkedLeasing{calls: e.claimParked(p)}
	if len(pk.calls) == 0 {
		return e.inTx(ctx, fn)
	}
	e.lapses.RLock() // as every lease: a reclaim's Cancel goes out before its redelivery
	err := e.inTx(ctx, func(t *txn) error {
		if err := fn(t); err != nil {
			return err
		}
		if err := pk.lease(ctx, t); err != nil {
			return parkedLeaseError{err}
		}
		return nil
	})
	e.lapses.RUnlock()
	pk.settle(e, err)
	var lerr parkedLeaseError
	if errors.As(err, &lerr) && !errors.Is(err, broker.ErrUnavailable) && ctx.Err() == nil {
		e.log.Warn("an enqueue's lease to the waiting sessions failed: enqueued without it", "err", err)
		return e.inTx(ctx, fn)
	}
	return err
}

// parkedLeaseError is the failure of the lease an enqueue ran for the
// parked sessions.
type parkedLeaseError struct{ err error }

func (e parkedLeaseError) Error() string { return "lease to the parked sessions: " + e.err.Error() }
func (e parkedLeaseError) Unwrap() error { return e.err }
