package bolt

import (
	"time"

	"github.com/conveyor-dev/conveyor/broker"
)

// This file is the dispatch limits of a queue: concurrency keys, the cap
// on ACTIVE tasks and, with ratelimit.go, the rate limit. None of them scans: a task held back
// by its key waits in its key's own line (heldline.go), so it never blocks
// the tasks behind it in the queue, and a freed slot or a refilled bucket wakes the
// queue's sessions by signal or timer.

// ckey is a concurrency key of one queue.
type ckey struct {
	q    *queue
	name string
	// admitted counts the key's tasks that are ready (in the queue's ready
	// FIFO) or ACTIVE; at most the queue's concurrency limit, unless the
	// limit was lowered since they were admitted (see overLimitLocked).
	admitted int
	// active counts the key's ACTIVE tasks.
	active int
	// held is the key's line of pending tasks beyond the limit: a FIFO
	// for each priority it holds entries of, highest first (heldline.go).
	// Entries whose task is no longer held are skipped when popped (lazy
	// deletion), and dropped as the ready FIFOs' are (compact.go).
	held []heldFIFO
	// heldN counts held's valid entries (tasks with flagHeld).
	heldN int
	// heldPass is the compaction pass under way over held (nil: none).
	heldPass *prioPass
	// refs counts the live tasks whose keyOf entry is this key, in any
	// state (a RETRY, SCHEDULED or BLOCKED one, or one not committed yet,
	// is neither admitted nor held). The key is forgotten only when it
	// reaches 0: a task that comes back to wait must find the same
	// admitted count, or two records of one key would each admit up to
	// the limit.
	refs int
}

// ckeyLocked returns the queue's concurrency key name, creating it, for a
// live task that the caller records in keyOf: the key counts it among its
// references until dropKeyLocked.
func (e *Engine) ckeyLocked(q *queue, name string) *ckey {
	id := ckeyID{queue: q.index, name: name}
	c := e.ckeys[id]
	if c == nil {
		c = &ckey{q: q, name: name}
		e.ckeys[id] = c
	}
	c.refs++
	return c
}

type ckeyID struct {
	queue uint16
	name  string
}

// admitLocked decides whether a pending task with concurrency key c may
// enter the ready FIFO now (it counts as admitted) or must wait in the
// key's line (broker.QueueConfig.KeyAdmits).
func (e *Engine) admitLocked(k key, m *meta, c *ckey) bool {
	if c.q.cfg.KeyAdmits(c.admitted) {
		c.admitted++
		return true
	}
	c.hold(k, m)
	return false
}

// unadmitLocked counts a keyed task out of its key's admitted ones (it
// left the ready FIFO other than by lease, or left ACTIVE) and admits the
// next held task of the key, if any.
func (e *Engine) unadmitLocked(k key) {
	c := e.keyOf[k]
	if c == nil {
		return
	}
	c.admitted--
	e.admitHeldLocked(c)
}

// admitHeldLocked moves held tasks of c into the ready FIFO while its
// limit allows, in its line's order: highest priority first, FIFO within
// a priority.
func (e *Engine) admitHeldLocked(c *ckey) {
	for c.q.cfg.KeyAdmits(c.admitted) {
		k, p, ok := c.popHeld()
		if !ok {
			break
		}
		m, live := e.tasks.get(k)
		if !live || !e.heldBy(k, m, c, p) {
			continue
		}
		m.flags &^= flagHeld
		c.heldN--
		c.admitted++
		e.enterReadyLocked(k, m)
	}
	c.dropStaleHeld()
}

// dropKeyLocked forgets a task's key when it leaves memory; a held task's
// FIFO entry is skipped later. The key itself is forgotten with its last
// live task (none is admitted or held then: what its line holds is stale).
func (e *Engine) dropKeyLocked(k key) {
	c := e.keyOf[k]
	if c == nil {
		return
	}
	delete(e.keyOf, k)
	if c.refs--; c.refs == 0 {
		delete(e.ckeys, ckeyID{queue: c.q.index, name: c.name})
		c.freeHeld()
	}
}

// overLimitLocked reports whether the keyed task k, just popped from its
// queue's ready FIFO to be leased, must wait instead: its key already has
// as many ACTIVE tasks as the limit allows. That happens only when the
// limit was lowered after the key admitted it (a key admits no more than
// its limit); it goes back to its key's line, at the back of its
// priority, and is admitted again as the key's ACTIVE tasks finish. So a
// lower limit holds from the moment it is set, without a walk of the
// ready line to find the tasks it admitted (broker.QueueConfig.KeyStarts).
func (e *Engine) overLimitLocked(k key, m *meta) bool {
	c := e.keyOf[k]
	if c == nil || c.q.cfg.KeyStarts(c.active) {
		return false
	}
	c.admitted--
	c.hold(k, m)
	e.tasks.put(k, *m)
	return true
}

// enteredActiveLocked counts a task that became ACTIVE among its key's.
func (e *Engine) enteredActiveLocked(k key) {
	if c := e.keyOf[k]; c != nil {
		c.active++
	}
}

// leftActiveLocked is called when a task leaves ACTIVE: its key admits the
// next, and a queue that was at its cap on ACTIVE tasks has room again:
// for one more task, and for a fired group whose members now fit.
func (e *Engine) leftActiveLocked(k key, q *queue) {
	if c := e.keyOf[k]; c != nil {
		c.active--
	}
	e.unadmitLocked(k)
	if q.cfg.MaxActive <= 0 || q.paused {
		return
	}
	room := q.cfg.ActiveRoom(q.counts[stateActive])
	if room == 1 && q.readyN > 0 || e.firedGroupFitsLocked(q, room) {
		e.note.TasksReady(q.name)
	}
}

// dispatchableLocked is how many of q's ready tasks may be leased at now:
// its ready count, bounded by the room under its ACTIVE cap and by the
// tokens in its rate bucket.
func (e *Engine) dispatchableLocked(q *queue, now time.Time) int {
	if q.paused {
		return 0
	}
	n := int(min(int64(q.readyN), q.cfg.ActiveRoom(q.counts[stateActive])))
	if q.cfg.RatePerSecond > 0 && n > 0 {
		e.refillLocked(q, now, q.cfg)
		allowed, wake := q.bucket.Alone(int64(n), now.UnixNano(), q.cfg)
		if n = int(allowed); n == 0 {
			e.armRefillLocked(q, wake)
		}
	}
	return n
}

// configChangedLocked applies a queue's new configuration (old was the
// one before): keys may admit more held tasks, the rate bucket keeps what
// it holds under the new rate, and the groups gathering follow the new
// group policy. A lower concurrency limit is applied as tasks are leased
// (Lease re-holds a keyed task whose key is at its limit), not here: the
// tasks a key admitted are not found without a walk of the ready line.
func (e *Engine) configChangedLocked(q *queue, old broker.QueueConfig) {
	e.rateChangedLocked(q, e.cfg.Now(), old)
	e.policyChangedLocked(q)
	for id, c := range e.ckeys {
		if id.queue == q.index {
			e.admitHeldLocked(c)
		}
	}
}
