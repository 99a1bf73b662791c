package bolt

import (
	"context"
	"fmt"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
	storagev1 "github.com/conveyor-dev/conveyor/gen/conveyor/storage/v1"
)

// This file is the lifetime of a lease once granted (dispatch.go grants
// them): renewal, release, progress, lapse and reclaim, all fenced by the
// lease's token.

// currentLeaseLocked returns the task's lease if ref names it for session.
func (e *Engine) currentLeaseLocked(session string, ref broker.LeaseRef) (key, *lease, error) {
	k, err := parseKey(ref.TaskID)
	if err != nil {
		return key{}, nil, fmt.Errorf("task %s: %w", ref.TaskID, broker.ErrLeaseLost)
	}
	l := e.leases[k]
	if l == nil || l.token != ref.Token || l.session != session {
		return key{}, nil, fmt.Errorf("task %s: %w", ref.TaskID, broker.ErrLeaseLost)
	}
	return k, l, nil
}

// dropLeaseLocked ends a task's lease, if it has one.
func (e *Engine) dropLeaseLocked(k key) {
	if l := e.leases[k]; l != nil {
		delete(e.leases, k)
		e.leaseHeap.remove(l)
	}
}

// Extend renews current leases; see broker.Broker.
func (e *Engine) Extend(_ context.Context, p broker.ExtendParams) (int, error) {
	expiry := satAdd(p.Now.UnixNano(), p.TTL)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return 0, errClosed
	}
	n, earliest := 0, false
	for _, ref := range p.Leases {
		_, l, err := e.currentLeaseLocked(p.SessionID, ref)
		if err != nil {
			continue
		}
		next := expiry
		if l.limit != 0 && l.limit < next {
			next = l.limit
		}
		if next != l.expiry {
			// A renewal moves a lease later (the limit was applied when
			// it was granted), unless the wall clock moved back: then it
			// may become the earliest expiry, before the time the reaper
			// sleeps until, and the reaper must hear of it.
			earlier := next < l.expiry
			l.expiry = next
			first := e.leaseHeap.moved(l)
			earliest = earliest || first && earlier
		}
		n++
	}
	if earliest {
		e.note.TimersChanged()
	}
	return n, nil
}

// Release hands leases back with no retry increment; see broker.Broker.
func (e *Engine) Release(_ context.Context, p broker.ReleaseParams) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return errClosed
	}
	for _, ref := range p.Leases {
		k, _, err := e.currentLeaseLocked(p.SessionID, ref)
		if err != nil {
			continue
		}
		e.applyLocked(k, broker.Released(p.SessionID, ref, p.Now))
	}
	return nil
}

// Progress records a running task's progress; see broker.Broker.
func (e *Engine) Progress(_ context.Context, p broker.ProgressParams) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return errClosed
	}
	k, _, err := e.currentLeaseLocked(p.SessionID, p.Lease)
	if err != nil {
		return err
	}
	pct, msg := p.Percent, p.Message
	e.commit.appendLocked(func(w *txw) error {
		return w.updateLive(k, func(st *storagev1.TaskStatus) {
			st.ProgressPercent, st.ProgressMessage = pct, msg
		})
	}, nil)
	return nil
}

// LapsedLeases lists the leases whose expiry passed; see broker.Broker.
// The heap is walked, not popped: an entry leaves only when Reclaim (or a
// Result) ends its lease, so a reaper that fails in between loses nothing.
func (e *Engine) LapsedLeases(_ context.Context, at time.Time) ([]broker.LapsedLease, time.Time, error) {
	now := at.UnixNano()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, time.Time{}, errClosed
	}
	var out []broker.LapsedLease
	// The heap property means every lapsed entry has lapsed ancestors:
	// visit children only of lapsed entries (work proportional to the result).
	stack := []int{0}
	for len(stack) > 0 {
		i := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if i >= len(e.leaseHeap) || e.leaseHeap[i].expiry > now {
			continue
		}
		l := e.leaseHeap[i]
		m := e.tasks.getOrZero(l.k)
		out = append(out, broker.LapsedLease{
			SessionID: l.session,
			Lease:     broker.LeaseRef{TaskID: l.k.String(), Token: l.token},
			Expiry:    time.Unix(0, l.expiry).UTC(),
			Limited:   l.limit != 0 && l.expiry == l.limit,
			Retried:   m.retried,
			MaxRetry:  m.maxRetry,

			StartAuthorized: l.started,
		})
		stack = append(stack, 2*i+1, 2*i+2)
	}
	var next time.Time
	if len(out) == 0 {
		if l := e.leaseHeap.peek(); l != nil {
			next = time.Unix(0, l.expiry)
		}
	}
	return out, next, nil
}

// Reclaim applies the reaper's decisions about lapsed leases; see
// broker.Broker. Each session is told of its lapse (Notifier.LeaseLapsed)
// under the engine lock, before the task can be leased again.
func (e *Engine) Reclaim(_ context.Context, decisions []broker.Decision) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return errClosed
	}
	for _, d := range decisions {
		k, l, err := e.currentLeaseLocked(d.SessionID, d.Lease)
		if err != nil || l.expiry > d.Now.UnixNano() {
			continue // answered, released or renewed since it was listed
		}
		lapsed := broker.LapsedLease{SessionID: l.session, Lease: d.Lease,
			Expiry: time.Unix(0, l.expiry).UTC(), Limited: l.limit != 0 && l.expiry == l.limit}
		lapsed.To = e.applyLocked(k, d)
		e.note.LeaseLapsed(lapsed)
	}
	return nil
}
