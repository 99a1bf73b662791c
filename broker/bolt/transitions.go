package bolt

import (
	"time"

	storagev1 "github.com/conveyor-dev/conveyor/gen/conveyor/storage/v1"

	"github.com/conveyor-dev/conveyor/broker"
)

// The helpers in this file are the only places a live task changes state.
// Each one updates the in-memory indexes and queues the matching write, in
// the same critical section, so memory and file change in the same order.

// pushReadyLocked makes a pending, durable task dispatchable, unless its
// concurrency key holds it back (limits.go), and signals the queue's
// sessions when the queue had nothing ready.
func (e *Engine) pushReadyLocked(k key) { e.offerReadyLocked(k, e.tasks.getOrZero(k)) }

// offerReadyLocked is pushReadyLocked for a task whose meta m the caller
// holds (the table may not have it yet). It reports whether it wrote m to
// the table: it does unless m is not a committed PENDING task waiting for
// neither the ready FIFO nor its concurrency key.
func (e *Engine) offerReadyLocked(k key, m meta) bool {
	if m.state != statePending || m.flags&flagCommitted == 0 || m.flags&(flagInReady|flagHeld) != 0 {
		return false
	}
	if c := e.keyOf[k]; c != nil && !e.admitLocked(k, &m, c) {
		e.tasks.put(k, m)
		return true
	}
	e.enterReadyLocked(k, m)
	return true
}

// enterReadyLocked puts an admitted task in its queue's ready FIFO.
func (e *Engine) enterReadyLocked(k key, m meta) {
	q := e.queues[m.queue]
	m.flags |= flagInReady
	m.passMark = q.readyMark(int(m.prio))
	e.tasks.put(k, m)
	q.ready[m.prio].push(k)
	q.readyN++
	// While a routed lease has passed tasks over, the count never went
	// back to 0 for a session waiting for its own kinds: each new ready
	// task is news to one.
	if (q.readyN == 1 || q.passedN > 0) && !q.paused {
		e.note.TasksReady(q.name)
	}
}

// popReadyLocked takes the next dispatchable task of q: highest priority
// first, FIFO within a priority. Stale entries are dropped on the way.
func (e *Engine) popReadyLocked(q *queue) (key, meta, bool) {
	for p := len(q.ready) - 1; p >= 0; p-- {
		for f := q.readyHead(p); f.len() > 0; f = q.readyHead(p) {
			k, _ := f.pop()
			m, live := e.tasks.get(k)
			if !live || !m.readyIn(q, p) {
				continue
			}
			e.takenLocked(q, k, &m)
			return k, m, true
		}
	}
	return key{}, meta{}, false
}

// takenLocked records that ready task k of q, whose meta is m, was popped
// to be leased: it leaves the ready line.
func (e *Engine) takenLocked(q *queue, k key, m *meta) {
	m.flags &^= flagInReady
	e.tasks.put(k, *m)
	q.readyN--
	q.dropStaleReady()
}

// unreadyLocked withdraws a task's ready entry, or its place in its key's
// FIFO: the entry stays, stale, and is skipped when popped or dropped by
// a compaction pass (compact.go). A ready keyed task leaves its key's
// admitted ones.
func (e *Engine) unreadyLocked(k key, m *meta) {
	if m.flags&flagInReady != 0 {
		m.flags &^= flagInReady
		q := e.queues[m.queue]
		q.readyN--
		if m.flags&flagPassed != 0 {
			e.unpassLocked(q, m)
		}
		e.readyLeftLocked(q)
		e.unadmitLocked(k)
	}
	if m.flags&flagHeld != 0 {
		m.flags &^= flagHeld
		c := e.keyOf[k]
		c.heldN--
		e.heldLeftLocked(c)
	}
}

// setStateLocked moves a live task to state to, keeping the counts (and a
// task leaving ACTIVE gives back its key's and its queue's room).
func (e *Engine) setStateLocked(k key, m *meta, to broker.State) {
	q := e.queues[m.queue]
	from := m.state
	q.counts[from]--
	q.counts[to]++
	m.state = to
	e.tasks.put(k, *m)
	switch from {
	case stateBlocked:
		e.leftBlockedLocked(k)
	case stateAggr:
		e.leftGroupLocked(k)
	}
	if from == stateActive && to != stateActive {
		e.leftActiveLocked(k, q)
	}
	if from == stateAggr && to != stateActive {
		e.groupShrankLocked(q)
	}
	if q.refused {
		e.roomChangedLocked(q)
	}
}

// indexExpiryLocked indexes a live task's expiry or its deadline,
// whichever is earlier (broker.ExpiryOf): a task still waiting then is
// archived (the flag says which of the two it was, for the message).
func (e *Engine) indexExpiryLocked(k key, m *meta, at, dl int64) {
	x, deadlineFirst := broker.ExpiryOf(fromNanos(at), fromNanos(dl))
	if deadlineFirst {
		m.flags |= flagDeadlineFirst
	}
	if at = nanos(x); at == 0 {
		return
	}
	e.expires[k] = at
	// A step first: the task may not be in the table yet, and a step
	// taken after the add could find its entry and drop it as stale.
	e.tidyExpiriesLocked()
	if e.expHeap.add(timed{at: at, k: k}) {
		e.note.TimersChanged()
	}
}

// expiredLocked archives a task whose expiry or deadline passed by now
// (one popped from a ready queue, or one coming back to wait after it ran
// past it) and reports whether it did. It is the mechanism that keeps such
// a task from ever running: no attempt is counted.
func (e *Engine) expiredLocked(k key, m meta, now int64) bool {
	msg, expired := e.expiryPassedLocked(k, m, now)
	if expired {
		e.countExpiredLocked(m.queue)
		e.finishLocked(k, m, stateArchived, now, func(st *storagev1.TaskStatus) { st.LastError = msg })
	}
	return expired
}

// countExpiredLocked counts a task of queue qi archived for its expiry or
// deadline, in memory and, in the same commit, on disk.
func (e *Engine) countExpiredLocked(qi uint16) {
	q := e.queues[qi]
	q.expired++
	e.commit.appendLocked(func(w *txw) error { w.countExpired(q.name); return nil }, nil)
}

// expiryPassedLocked reports whether a live task's expiry or deadline
// passed by now, and the message of its archival if so.
func (e *Engine) expiryPassedLocked(k key, m meta, now int64) (string, bool) {
	if !e.expiryPassedAt(k, now) {
		return "", false
	}
	return broker.ExpiryMessage(m.flags&flagDeadlineFirst != 0), true
}

// expiryPassedAt reports whether live task k is past its expiry or
// deadline at now (broker.Expired); a task without either never is.
func (e *Engine) expiryPassedAt(k key, now int64) bool {
	at, ok := e.expires[k]
	return ok && broker.Expired(fromNanos(at), fromNanos(now))
}

// toPendingLocked makes a live task pending now and queues its write; fn
// may change more of the stored status. A task whose expiry passed is
// archived instead.
func (e *Engine) toPendingLocked(k key, m meta, now int64, fn func(st *storagev1.TaskStatus)) {
	if e.expiredLocked(k, m, now) {
		return
	}
	m.due = now
	e.setStateLocked(k, &m, statePending)
	e.writeStateLocked(k, statePending, fn)
	e.pushReadyLocked(k)
}

// writeStateLocked queues the write of a live task's new state, with
// fn's other changes to its status (fn may be nil).
func (e *Engine) writeStateLocked(k key, to broker.State, fn func(st *storagev1.TaskStatus)) {
	e.commit.appendLocked(func(w *txw) error {
		return w.updateLive(k, func(st *storagev1.TaskStatus) {
			st.State = int32(to)
			if fn != nil {
				fn(st)
			}
		})
	}, nil)
}

// toRetryLocked records a failed attempt (one more retry counted, its
// error kept) and makes the task RETRY until due, or PENDING at once when
// due is not after now.
func (e *Engine) toRetryLocked(k key, m meta, due int64, now int64, errMsg string) {
	m.retried++
	retried := m.retried
	record := func(st *storagev1.TaskStatus) {
		st.Retried = retried
		st.LastError = errMsg
		recordError(st, retried, errMsg, now)
		st.ProgressPercent, st.ProgressMessage = 0, ""
	}
	if due <= now {
		e.toPendingLocked(k, m, now, record)
		return
	}
	if e.expiredLocked(k, m, now) {
		return
	}
	m.due = due
	e.setStateLocked(k, &m, stateRetry)
	e.addDueLocked(k, due)
	e.commit.appendLocked(func(w *txw) error {
		return w.updateLive(k, func(st *storagev1.TaskStatus) {
			st.State = int32(stateRetry)
			st.NextProcessAt = due
			record(st)
		})
	}, nil)
}

// finishLocked makes a live task terminal: it leaves memory (its durable
// record moves to the done bucket) and is indexed for purging: by its own
// purge time when it has a retention of its own (a COMPLETED task), else
// by when it ended, under its class, for the purger's horizon. fn may
// change more of the stored status. Its write is queued, then its
// dependents learn what its end means for them (cascadeLocked).
func (e *Engine) finishLocked(k key, m meta, to broker.State, now int64, fn func(st *storagev1.TaskStatus)) {
	e.cascadeLocked(e.beginFinishLocked(k, m, to, now, fn), now)
}

// beginFinishLocked is finishLocked up to its dependents: it queues the
// task's write and returns the frame that resolves them.
func (e *Engine) beginFinishLocked(k key, m meta, to broker.State, now int64, fn func(st *storagev1.TaskStatus)) endFrame {
	e.unreadyLocked(k, &m)
	q := e.queues[m.queue]
	q.counts[m.state]--
	q.counts[to]++
	switch m.state {
	case stateActive:
		e.leftActiveLocked(k, q)
	case stateBlocked:
		e.leftBlockedLocked(k)
	case stateAggr:
		e.leftGroupLocked(k)
	}
	r, ownRetention := e.retention[k]
	e.forgetLocked(k)
	if m.state == stateAggr {
		e.groupShrankLocked(q)
	}
	if q.refused {
		e.roomChangedLocked(q)
	}
	var purgeAt int64 // 0: by class
	if ownRetention && to == stateCompleted {
		purgeAt = satAdd(now, time.Duration(r))
		if e.purgeNext == 0 || purgeAt < e.purgeNext {
			e.purgeNext = purgeAt
			e.note.TimersChanged()
		}
	} else if c := classOf(to); e.endedFirst[c] == 0 {
		e.endedFirst[c] = now
		e.note.TimersChanged()
	}
	e.settling[k] = settled{n: e.settling[k].n + 1, state: to, at: now}
	e.commit.appendLocked(func(w *txw) error {
		return w.finish(k, purgeAt, func(st *storagev1.TaskStatus) {
			st.State = int32(to)
			st.CompletedAt = now
			if fn != nil {
				fn(st)
			}
		})
	}, func() {
		if s := e.settling[k]; s.n <= 1 {
			delete(e.settling, k)
		} else {
			s.n--
			e.settling[k] = s
		}
	})
	return e.dependentsFrameLocked(k, to)
}
