package bolt

import (
	"bytes"
	"context"

	"github.com/conveyor-dev/conveyor/broker"
	storagev1 "github.com/conveyor-dev/conveyor/gen/conveyor/storage/v1"
)

// Complete applies a decision about a leased task; see broker.Broker.
func (e *Engine) Complete(_ context.Context, d broker.Decision) (broker.State, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return 0, errClosed
	}
	k, _, err := e.currentLeaseLocked(d.SessionID, d.Lease)
	if err != nil {
		return 0, err
	}
	return e.applyLocked(k, d), nil
}

// CompleteBatch applies decisions about leased tasks, each on its own,
// under one hold of the lock; see broker.Broker.
func (e *Engine) CompleteBatch(_ context.Context, ds []broker.Decision) ([]broker.Completion, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, errClosed
	}
	out := make([]broker.Completion, len(ds))
	for i, d := range ds {
		k, _, err := e.currentLeaseLocked(d.SessionID, d.Lease)
		if err != nil {
			out[i].Err = err
			continue
		}
		out[i].State = e.applyLocked(k, d)
	}
	return out, nil
}

// applyLocked applies decision d to the leased task k, whose lease the
// caller has checked, and returns the task's state after. The storage's
// overrides apply here: a task an operator canceled while it ran follows
// broker.Decision.Canceled, an authorized at-most-once attempt
// broker.Decision.StartAuthorized, and one whose expiry or deadline passed while
// it ran is archived instead of waiting again (toPendingLocked).
func (e *Engine) applyLocked(k key, d broker.Decision) broker.State {
	m := e.tasks.getOrZero(k)
	if l := e.leases[k]; l != nil && l.started {
		d = d.StartAuthorized()
	}
	if m.flags&flagCanceled != 0 {
		d = d.Canceled()
	}
	now := d.Now.UnixNano()
	e.dropLeaseLocked(k)
	if _, ok := e.ranPastExpiry[k]; ok {
		// Its expiry came while it ran: should it wait again, not
		// archived as of d.Now, the next timer round archives it.
		delete(e.ranPastExpiry, k)
		e.tidyExpiriesLocked()
		if e.expHeap.add(timed{at: e.expires[k], k: k}) {
			e.note.TimersChanged()
		}
	}
	if d.Verdict {
		e.countAttemptLocked(m.queue, d.Kind != broker.DecideComplete)
	}
	switch d.Kind {
	case broker.DecideComplete:
		result := bytes.Clone(d.Result) // written by the committer, after Complete returns
		e.finishLocked(k, m, stateCompleted, now, func(st *storagev1.TaskStatus) {
			st.Result = result
			st.ProgressPercent = 100
		})
		return stateCompleted
	case broker.DecideArchive:
		attempt, msg := m.retried+1, d.Error
		e.finishLocked(k, m, stateArchived, now, func(st *storagev1.TaskStatus) {
			st.LastError = msg
			recordError(st, attempt, msg, now)
		})
		return stateArchived
	case broker.DecideCancel:
		e.finishLocked(k, m, stateCanceled, now, nil)
		return stateCanceled
	case broker.DecideRetry:
		e.toRetryLocked(k, m, nanos(d.Due), now, d.Error)
	default: // DecideRelease
		e.toPendingLocked(k, m, now, nil)
	}
	if m, ok := e.tasks.get(k); ok {
		return m.state
	}
	return stateArchived // its expiry or deadline passed while it ran
}

// countAttemptLocked counts an attempt that ended with a worker's verdict,
// in memory and, in the same commit as the verdict, on disk.
func (e *Engine) countAttemptLocked(qi uint16, failed bool) {
	q := e.queues[qi]
	q.processed++
	if failed {
		q.failed++
	}
	name := q.name
	e.commit.appendLocked(func(w *txw) error {
		w.countAttempt(name, failed)
		return nil
	}, nil)
}

// recordError appends a failed attempt to a status's history, keeping the
// latest broker.MaxErrorHistory.
func recordError(st *storagev1.TaskStatus, attempt int32, msg string, now int64) {
	st.Errors = append(st.Errors, &storagev1.AttemptErrorRecord{Attempt: attempt, Message: msg, At: now})
	if n := len(st.Errors); n > broker.MaxErrorHistory {
		st.Errors = append(st.Errors[:0], st.Errors[n-broker.MaxErrorHistory:]...)
	}
}
