package bolt

import (
	"context"
	"time"
)

// PromoteDue makes due SCHEDULED and RETRY tasks pending, archives
// waiting tasks whose expiry (or deadline) passed, fires the groups whose
// time came and wakes the sessions of the queues whose rate bucket
// refilled; see broker.Broker. The first three come off time-ordered
// heaps, so the cost is proportional to the work done; the refills are
// those of the queues that wait for one.
func (e *Engine) PromoteDue(_ context.Context, at time.Time) (time.Time, error) {
	now := at.UnixNano()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return time.Time{}, errClosed
	}
	if e.clockStart == 0 {
		e.clockStart = now
	}
	for {
		t, ok := e.dueHeap.peek()
		if !ok {
			break
		}
		current := e.dueCurrentLocked(t)
		if current && t.at > now {
			break
		}
		e.dueHeap.pop()
		if current {
			e.toPendingLocked(t.k, e.tasks.getOrZero(t.k), now, nil)
		}
	}
	for {
		t, ok := e.expHeap.peek()
		if !ok {
			break
		}
		current := e.expiryCurrentLocked(t)
		if current && t.at > now {
			break
		}
		e.expHeap.pop()
		if m := e.tasks.getOrZero(t.k); current && m.state.Waiting() {
			e.expiredLocked(t.k, m, now)
		} else if current {
			// A task that is running keeps its entry in e.expires: it is
			// archived if it ever comes back to wait (its lease limit
			// bounds how long it may run past a deadline). Its result may
			// bring it back with a time read before now, not past the
			// expiry yet: its entry is indexed again then.
			e.ranPastExpiry[t.k] = struct{}{}
		}
	}
	next := e.fireDueLocked(now)
	if t, ok := e.dueHeap.peek(); ok && (next == 0 || t.at < next) {
		next = t.at
	}
	if t, ok := e.expHeap.peek(); ok && (next == 0 || t.at < next) {
		next = t.at
	}
	if at := e.wakeRefilledLocked(now); at != 0 && (next == 0 || at < next) {
		next = at
	}
	e.promoteNext = next
	if next == 0 {
		return time.Time{}, nil
	}
	return time.Unix(0, next), nil
}
