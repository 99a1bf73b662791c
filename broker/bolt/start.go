package bolt

import (
	"context"
	"fmt"

	"github.com/conveyor-dev/conveyor/broker"
	storagev1 "github.com/conveyor-dev/conveyor/gen/conveyor/storage/v1"
)

// AuthorizeStart commits the start of an at-most-once attempt; see
// broker.StartAuthorizer. The mark is on the lease in memory from now on
// (so a release or a lapse that comes before the commit is durable still
// archives the task: a worker may have been told) and in the task's
// status once the commit is durable, for a restart. A commit that fails
// leaves the mark in memory: the attempt may not have started, but it is
// never run twice.
func (e *Engine) AuthorizeStart(ctx context.Context, p broker.StartParams) error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return errClosed
	}
	k, l, err := e.currentLeaseLocked(p.SessionID, p.Lease)
	if err != nil {
		e.mu.Unlock()
		return err
	}
	m := e.tasks.getOrZero(k)
	if m.flags&flagCanceled != 0 {
		e.mu.Unlock()
		return fmt.Errorf("task %s was canceled before its start: %w", p.Lease.TaskID, broker.ErrInvalidState)
	}
	if !e.kinds[m.kind].AtMostOnce {
		e.mu.Unlock()
		return nil
	}
	var b *batch
	if l.started {
		b = e.commit.syncPointLocked() // a repeated Start: answer once the first is durable
	} else {
		l.started = true
		b = e.commit.appendSyncLocked(func(w *txw) error {
			return w.updateLive(k, func(st *storagev1.TaskStatus) { st.StartAuthorized = true })
		}, nil)
	}
	e.mu.Unlock()
	if b == nil {
		return nil
	}
	return e.commit.wait(ctx, b)
}

// interruptedPushLocked counts the attempt of a task found ACTIVE, leased
// to a push endpoint, when the file was opened (broker.InterruptedPush).
func (e *Engine) interruptedPushLocked(k key, m meta, now int64) {
	attempt := m.retried + 1
	retried, to := broker.InterruptedPush(m.retried, m.maxRetry)
	if to == stateArchived {
		e.finishLocked(k, m, stateArchived, now, func(st *storagev1.TaskStatus) {
			st.LastError = broker.InterruptedPushError
			recordError(st, attempt, broker.InterruptedPushError, now)
		})
		return
	}
	m.retried = retried
	e.tasks.put(k, m)
	e.commit.appendLocked(func(w *txw) error {
		return w.updateLive(k, func(st *storagev1.TaskStatus) {
			st.State = int32(statePending)
			st.PushInvoked = false
			st.Retried = retried
			st.LastError = broker.InterruptedPushError
			recordError(st, attempt, broker.InterruptedPushError, now)
		})
	}, nil)
}

// outcomeUnknownLocked archives an at-most-once task found ACTIVE with its
// start authorized when the file was opened.
func (e *Engine) outcomeUnknownLocked(k key, m meta, now int64) {
	msg := broker.OutcomeUnknownPrefix + broker.UnknownRestart
	attempt := m.retried + 1
	e.finishLocked(k, m, stateArchived, now, func(st *storagev1.TaskStatus) {
		st.LastError = msg
		recordError(st, attempt, msg, now)
	})
}
