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

// Ready reports each queue's dispatchable task count, within its limits;
// see broker.Broker.
func (e *Engine) Ready(queues []string, counts []int) {
	now := e.cfg.Now()
	e.mu.Lock()
	defer e.mu.Unlock()
	for i, name := range queues {
		counts[i] = 0
		if q := e.byName[name]; q != nil {
			counts[i] = e.dispatchableLocked(q, now)
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
	var starts []int64
	rt := newRouter(p.Route)
	for _, pick := range p.Picks {
		q := e.byName[pick.Queue]
		if q == nil || q.paused {
			continue
		}
		want := min(pick.N, e.dispatchableLocked(q, p.Now))
		n := 0
		for n < want {
			k, m, ok := e.popRoutedLocked(q, rt)
			if !ok {
				break
			}
			if e.expiryPassedAt(k, now) {
				e.unadmitLocked(k) // it left the ready FIFO, not to run
				e.expiredLocked(k, m, now)
				continue // past its expiry or deadline: archived, never run
			}
			if e.overLimitLocked(k, &m) {
				continue // its key's limit was lowered: back to the key's line
			}
			// p.Now was read before this call took the lock, so it may be a
			// little older than the change that made the task pending (a
			// dependency's completion, its enqueue): the start is not
			// stamped before that.
			start := max(now, m.due)
			keys = append(keys, k)
			starts = append(starts, start)
			out = append(out, e.grantLocked(k, &m, p.SessionID, start, expiry))
			n++
		}
		e.tookLocked(q, n, p.Now)
	}
	e.persistStartsLocked(keys, starts, p.Push)
	e.mu.Unlock()
	if len(out) == 0 {
		return nil, nil
	}
	kept, err := e.fillSpecs(out)
	if err != nil {
		e.releaseUnsent(p.SessionID, out, p.Now)
		return nil, err
	}
	if out = kept; len(out) == 0 {
		return nil, nil
	}
	e.limitLeases(out, p.Now, p.LimitGrace)
	return out, nil
}

// releaseUnsent hands back leases just granted that the caller will never
// learn of, because the call fails after granting them (a spec could not
// be read): pending again at once, no retry counted, as for a session that
// ended, instead of ACTIVE under a lease nobody holds until it lapses.
func (e *Engine) releaseUnsent(session string, out []broker.Lease, now time.Time) {
	refs := make([]broker.LeaseRef, len(out))
	for i, l := range out {
		refs[i] = broker.LeaseRef{TaskID: l.Task.ID, Token: l.Token}
	}
	_ = e.Release(context.Background(), broker.ReleaseParams{SessionID: session, Leases: refs, Now: now}) // fails only once closed
}

// fillSpecs completes leased tasks from their stored specs. A spec is
// immutable and durable before its task can be leased, so reading it
// outside the engine lock is safe. A task whose spec is missing (a damaged
// file) is logged and left out, so that it cannot keep the others of the
// call from their workers; its lease lapses.
func (e *Engine) fillSpecs(out []broker.Lease) ([]broker.Lease, error) {
	kept := make([]broker.Lease, 0, len(out))
	err := e.view(func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketTasks)
		var spec storagev1.TaskSpec
		for i := range out {
			t := out[i].Task
			k, _ := parseKey(t.ID)
			v := b.Get(k[:])
			if v == nil {
				e.log.Error("spec of leased task is missing; leaving it out", "task", t.ID, "queue", t.Queue)
				continue
			}
			spec.Reset()
			if err := proto.Unmarshal(v, &spec); err != nil {
				return fmt.Errorf("spec of %s: %w", t.ID, err)
			}
			fillFromSpec(t, &spec)
			spec.Metadata, spec.Payload, spec.Options = nil, nil, nil
			kept = append(kept, out[i])
		}
		return nil
	})
	return kept, err
}

// limitLeases caps each new lease's expiry, and every renewal of it, at
// broker.LeaseLimit of its task (started at now, with grace): computed
// once the specs are read (a task's deadline and timeout are there), in
// one more hold of the lock, taken only when a task has a limit.
func (e *Engine) limitLeases(out []broker.Lease, now time.Time, grace time.Duration) {
	var locked bool
	for i := range out {
		t := out[i].Task
		at := broker.LeaseLimit(t.Deadline, t.Timeout, now, grace)
		if at.IsZero() {
			continue
		}
		if !locked { // most tasks have no limit: take the lock only if one does
			e.mu.Lock()
			defer e.mu.Unlock()
			locked = true
		}
		k, _ := parseKey(t.ID)
		l := e.leases[k]
		if l == nil || l.token != out[i].Token {
			continue
		}
		l.limit = nanos(at)
		if l.limit < l.expiry {
			l.expiry = l.limit
			out[i].Expiry = time.Unix(0, l.expiry).UTC()
			if e.leaseHeap.moved(l) {
				e.note.TimersChanged()
			}
		}
	}
}

// grantLocked makes task k (m is its meta) ACTIVE under a new lease of
// session until expiry, started at start, and returns the lease to hand
// out (its spec not filled in yet). The change reaches the file through
// persistStartsLocked.
func (e *Engine) grantLocked(k key, m *meta, session string, start, expiry int64) broker.Lease {
	e.setStateLocked(k, m, stateActive)
	e.enteredActiveLocked(k)
	e.nextToken++
	l := &lease{k: k, session: session, token: e.nextToken, expiry: expiry}
	e.leases[k] = l
	if e.leaseHeap.add(l) {
		e.note.TimersChanged()
	}
	return broker.Lease{
		Token:  l.token,
		Expiry: time.Unix(0, expiry).UTC(),
		Task: &broker.Task{
			ID: k.String(), State: stateActive, Priority: int32(m.prio),
			Retried: m.retried, MaxRetry: m.maxRetry, StartedAt: time.Unix(0, start).UTC(),
			NextProcessAt: fromNanos(m.due), SessionID: session, LeaseToken: l.token,
			AtMostOnce: e.kinds[m.kind].AtMostOnce,
		},
	}
}

// persistStartsLocked queues the ACTIVE writes of the tasks just granted
// (keys[i] started at starts[i]; push: to a push endpoint) into the next
// group commit, which no caller waits for: a lease lost in a crash leaves
// its task PENDING, as a restart would make it anyway.
func (e *Engine) persistStartsLocked(keys []key, starts []int64, push bool) {
	if len(keys) == 0 {
		return
	}
	e.commit.appendLocked(func(w *txw) error {
		for i, k := range keys {
			if err := w.updateLive(k, func(st *storagev1.TaskStatus) {
				st.State = int32(stateActive)
				st.StartedAt = starts[i]
				st.StartAuthorized = false // a new attempt starts unauthorized
				st.PushInvoked = push
			}); err != nil {
				return err
			}
		}
		return nil
	}, nil)
}
