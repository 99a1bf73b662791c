package bolt

import (
	"context"
	"fmt"
	"time"

	bbolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"

	"github.com/conveyor-dev/conveyor/broker"
	storagev1 "github.com/conveyor-dev/conveyor/gen/conveyor/storage/v1"
)

// Ready reports each queue's dispatchable task count; see broker.Broker.
func (e *Engine) Ready(queues []string, counts []int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for i, name := range queues {
		counts[i] = 0
		if q := e.byName[name]; q != nil && !q.paused {
			counts[i] = q.readyN
		}
	}
}

// Lease leases ready tasks to a session; see broker.Broker. The ACTIVE
// state is written in the next group commit, but Lease does not wait for
// it: if the server dies first the task is simply still PENDING in the
// file, which is what a restart would make of an ACTIVE task anyway.
func (e *Engine) Lease(ctx context.Context, p broker.LeaseParams) ([]broker.Lease, error) {
	now := p.Now.UnixNano()
	expiry := satAdd(now, p.TTL)
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil, errClosed
	}
	var out []broker.Lease
	var keys []key
	var expired []key
	for _, pick := range p.Picks {
		q := e.byName[pick.Queue]
		if q == nil || q.paused {
			continue
		}
		for n := 0; n < pick.N; {
			k, m, ok := e.popReadyLocked(q)
			if !ok {
				break
			}
			if at, ok := e.expires[k]; ok && at <= now {
				expired = append(expired, k)
				continue
			}
			e.setStateLocked(k, &m, stateActive)
			e.nextToken++
			l := &lease{k: k, session: p.SessionID, token: e.nextToken, expiry: expiry}
			e.leases[k] = l
			if e.leaseHeap.add(l) {
				e.note.TimersChanged()
			}
			keys = append(keys, k)
			out = append(out, broker.Lease{
				Token:  e.nextToken,
				Expiry: time.Unix(0, expiry).UTC(),
				Task: &broker.Task{
					ID: k.String(), State: stateActive, Priority: int32(m.prio),
					Retried: m.retried, MaxRetry: m.maxRetry, StartedAt: time.Unix(0, now).UTC(),
				},
			})
			n++
		}
	}
	for _, k := range expired {
		e.finishLocked(k, e.tasks.getOrZero(k), stateArchived, now, func(st *storagev1.TaskStatus) {
			st.LastError = "expired before it could run"
		})
	}
	if len(keys) > 0 {
		e.commit.appendLocked(func(w *txw) error {
			for _, k := range keys {
				if err := w.updateLive(k, func(st *storagev1.TaskStatus) {
					st.State = stateActive
					st.StartedAt = now
				}); err != nil {
					return err
				}
			}
			return nil
		}, nil)
	}
	e.mu.Unlock()
	if len(out) == 0 {
		return nil, nil
	}
	if err := e.fillSpecs(out); err != nil {
		return nil, err
	}
	out = e.dropPastDeadline(ctx, p, out)
	e.limitLeases(p.Now, out)
	return out, nil
}

// fillSpecs completes leased tasks from their stored specs. A spec is
// immutable and durable before its task can be leased, so reading it
// outside the engine lock is safe.
func (e *Engine) fillSpecs(out []broker.Lease) error {
	return e.view(func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketTasks)
		var spec storagev1.TaskSpec
		for i := range out {
			t := out[i].Task
			k, _ := parseKey(t.ID)
			v := b.Get(k[:])
			if v == nil {
				return fmt.Errorf("spec of leased task %s is missing", t.ID)
			}
			spec.Reset()
			if err := proto.Unmarshal(v, &spec); err != nil {
				return fmt.Errorf("spec of %s: %w", t.ID, err)
			}
			t.Queue, t.Type, t.Payload = spec.GetQueue(), spec.GetType(), spec.GetPayload()
			t.ContentType, t.Metadata, t.Options = spec.GetContentType(), spec.GetMetadata(), spec.GetOptions()
			t.Deadline = deadlineOf(spec.GetOptions())
			spec.Options, spec.Metadata, spec.Payload = nil, nil, nil
		}
		return nil
	})
}

// dropPastDeadline archives leased tasks whose deadline already passed
// (they must not run) and returns the rest.
func (e *Engine) dropPastDeadline(ctx context.Context, p broker.LeaseParams, out []broker.Lease) []broker.Lease {
	kept := out[:0]
	for _, l := range out {
		if l.Task.Deadline.IsZero() || l.Task.Deadline.After(p.Now) {
			kept = append(kept, l)
			continue
		}
		_, _ = e.Complete(ctx, broker.CompleteParams{
			SessionID: p.SessionID,
			Lease:     broker.LeaseRef{TaskID: l.Task.ID, Token: l.Token},
			Outcome:   outcomeSkipRetry,
			ErrorMsg:  "deadline passed before the task could run",
			Now:       p.Now,
		})
	}
	return kept
}

// limitLeases caps the leases of tasks with a timeout or deadline at that
// bound plus Config.LimitGrace: heartbeats cannot keep such an attempt
// alive past it, so a worker that ignores its deadline loses the task to
// the reaper (a failed attempt, and a Cancel) instead of holding it forever.
func (e *Engine) limitLeases(now time.Time, out []broker.Lease) {
	var locked bool
	for i := range out {
		bound := out[i].Task.AttemptBound(now)
		if bound.IsZero() {
			continue
		}
		if !locked { // most tasks have no bound: take the lock only if one does
			e.mu.Lock()
			defer e.mu.Unlock()
			locked = true
		}
		k, _ := parseKey(out[i].Task.ID)
		l := e.leases[k]
		if l == nil || l.token != out[i].Token {
			continue
		}
		l.limit = nanos(bound.Add(e.cfg.LimitGrace))
		if l.limit < l.expiry {
			l.expiry = l.limit
			out[i].Expiry = time.Unix(0, l.expiry).UTC()
			if e.leaseHeap.moved(l) {
				e.note.TimersChanged()
			}
		}
	}
}

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

// Extend renews current leases; see broker.Broker.
func (e *Engine) Extend(_ context.Context, p broker.ExtendParams) (int, error) {
	expiry := satAdd(p.Now.UnixNano(), p.TTL)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return 0, errClosed
	}
	n := 0
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
			// A renewal only moves a lease later (the limit was applied
			// when it was granted), so the earliest expiry never moves
			// earlier here and the reaper needs no signal.
			l.expiry = next
			e.leaseHeap.moved(l)
		}
		n++
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
	now := p.Now.UnixNano()
	for _, ref := range p.Leases {
		k, _, err := e.currentLeaseLocked(p.SessionID, ref)
		if err != nil {
			continue
		}
		e.releaseLocked(k, now)
	}
	return nil
}

// releaseLocked ends a lease with no penalty: the task is pending again at
// once, or canceled if an operator canceled it while it ran.
func (e *Engine) releaseLocked(k key, now int64) {
	e.dropLeaseLocked(k)
	m := e.tasks.getOrZero(k)
	if m.flags&flagCanceled != 0 {
		e.finishLocked(k, m, stateCanceled, now, nil)
		return
	}
	e.toPendingLocked(k, m, now, nil)
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

// ReapLeases expires lapsed leases; see broker.Broker. A lapsed lease
// counts as a failed attempt (the worker may have crashed because of the
// task), so a task that keeps killing its workers is archived once its
// retries are spent.
func (e *Engine) ReapLeases(_ context.Context, at time.Time) ([]broker.LapsedLease, time.Time, error) {
	now := at.UnixNano()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, time.Time{}, errClosed
	}
	var lapsed []broker.LapsedLease
	for {
		l := e.leaseHeap.peek()
		if l == nil {
			return lapsed, time.Time{}, nil
		}
		if l.expiry > now {
			return lapsed, time.Unix(0, l.expiry), nil
		}
		k := l.k
		ll := broker.LapsedLease{
			SessionID: l.session,
			Lease:     broker.LeaseRef{TaskID: k.String(), Token: l.token},
		}
		lapsed = append(lapsed, ll)
		e.note.LeaseLapsed(ll)
		e.dropLeaseLocked(k)
		m := e.tasks.getOrZero(k)
		msg := "lease expired: the worker stopped heartbeating"
		if l.limit != 0 && l.expiry == l.limit {
			msg = "the attempt ran past its timeout or deadline"
		}
		if m.flags&flagCanceled != 0 || m.retried >= m.maxRetry {
			e.finishLocked(k, m, stateArchived, now, func(st *storagev1.TaskStatus) { st.LastError = msg })
			continue
		}
		m.retried++
		retried := m.retried
		e.toPendingLocked(k, m, now, func(st *storagev1.TaskStatus) {
			st.Retried = retried
			st.LastError = msg
		})
	}
}

// dropLeaseLocked ends a task's lease, if it has one.
func (e *Engine) dropLeaseLocked(k key) {
	if l := e.leases[k]; l != nil {
		delete(e.leases, k)
		e.leaseHeap.remove(l)
	}
}
