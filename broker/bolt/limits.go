package bolt

import (
	"math"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
)

// This file is the dispatch limits of a queue: concurrency keys, the cap
// on ACTIVE tasks and the rate limit. None of them scans: a task held back
// by its key waits in its key's own line (heldline.go), so it never blocks
// the tasks behind it in the queue, and a freed slot or a refilled bucket wakes the
// queue's sessions by signal or timer.

// ckey is a concurrency key of one queue.
type ckey struct {
	q    *queue
	name string
	// admitted counts the key's tasks that are ready (in the queue's ready
	// FIFO) or ACTIVE; at most the queue's concurrency limit.
	admitted int
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

// limit is how many of a key's tasks may be admitted at once.
func (c *ckey) limit() int {
	if n := c.q.cfg.ConcurrencyLimit; n > 0 {
		return int(n)
	}
	return 1
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
// key's line.
func (e *Engine) admitLocked(k key, m *meta, c *ckey) bool {
	if c.admitted < c.limit() {
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
	for c.admitted < c.limit() {
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

// leftActiveLocked is called when a task leaves ACTIVE: its key admits the
// next, and a queue that was at its cap on ACTIVE tasks has room again:
// for one more task, and for a fired group whose members now fit.
func (e *Engine) leftActiveLocked(k key, q *queue) {
	e.unadmitLocked(k)
	mx := int64(q.cfg.MaxActive)
	if mx <= 0 || q.paused {
		return
	}
	room := mx - q.counts[stateActive]
	if room == 1 && q.readyN > 0 || e.firedGroupFitsLocked(q, int(room)) {
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
	n := q.readyN
	if mx := int64(q.cfg.MaxActive); mx > 0 {
		n = min(n, int(max(mx-q.counts[stateActive], 0)))
	}
	if q.cfg.RatePerSecond > 0 && n > 0 {
		q.bucket.refill(now, q.cfg)
		held := q.bucket.heldAt(now.UnixNano())
		n = max(min(n, int(q.bucket.tokens-held)), 0) // in debt after a large group: none
		if n == 0 {
			e.armRefillLocked(q, held+1)
		}
	}
	return n
}

// groupTokensLocked reports whether q's rate bucket lets fired group g,
// of n members, go at now. Each member takes a token, as a task leased
// alone does (tookLocked), so the group needs n tokens; one of more
// members than the burst needs a full bucket and leaves it in debt, which
// the queue's next dispatches wait out, so that it is not held back
// forever. Tokens held for another group are not g's to spend. When g
// must wait, the refill timer is armed for it, and the tokens it needs
// are held for it unless another group's hold is on.
func (e *Engine) groupTokensLocked(q *queue, g *group, n int, now time.Time) bool {
	if q.cfg.RatePerSecond <= 0 {
		return true
	}
	q.bucket.refill(now, q.cfg)
	need := min(float64(n), burstOf(q.cfg))
	held := q.bucket.heldAt(now.UnixNano())
	if q.bucket.holder == g {
		held = 0
	}
	if q.bucket.tokens-held >= need {
		if q.bucket.holder == g {
			q.bucket.held, q.bucket.holder = 0, nil
		}
		return true
	}
	if held == 0 {
		e.holdTokensLocked(q, g, need)
	} else {
		e.armRefillLocked(q, held+need)
	}
	return false
}

// holdTokensLocked keeps the tokens fired group g waits for from tasks
// leased alone (and from other groups), which would otherwise take each
// token as it comes and starve a group needing several: until the bucket
// holds need, only tokens above it are spent on them. The hold lapses
// holdGrace after the bucket could have paid, so that a group no session
// comes back for (its workers gone, or busy, or the group gone) does not
// hold the queue's other tasks back.
func (e *Engine) holdTokensLocked(q *queue, g *group, need float64) {
	paid := e.armRefillLocked(q, need)
	q.bucket.held, q.bucket.heldUntil, q.bucket.holder = need, paid+int64(holdGrace), g
}

// holdGrace is how long a hold of tokens outlasts the moment the bucket
// could pay for its group.
const holdGrace = time.Second

// dropEmptyHoldLocked ends the hold of q's rate bucket when the group it
// is for has no members left (they were canceled, deleted or expired):
// the tasks leased alone need not wait for the hold to lapse.
func (e *Engine) dropEmptyHoldLocked(q *queue) {
	if g := q.bucket.holder; g == nil || g.live > 0 {
		return
	}
	q.bucket.held, q.bucket.holder = 0, nil
	if q.readyN > 0 && !q.paused {
		e.note.TasksReady(q.name)
	}
}

// took records that n tasks of q were leased at now (spending tokens).
func (e *Engine) tookLocked(q *queue, n int, now time.Time) {
	if q.cfg.RatePerSecond <= 0 || n == 0 {
		return
	}
	q.bucket.refill(now, q.cfg)
	q.bucket.tokens -= float64(n)
	if q.bucket.tokens < 1 && (q.readyN > 0 || q.fired.len() > 0) {
		e.armRefillLocked(q, 1)
	}
}

// bucket is a token bucket for a queue's dispatches.
type bucket struct {
	tokens float64 // below 0 after a group of more members than the burst
	last   int64   // when tokens was computed (Unix ns); 0: never (full)
	wakeAt int64   // when the armed refill timer fires, in last's clock; 0: none
	// held tokens are kept for fired group holder until heldUntil (see
	// holdTokensLocked); 0: none.
	held      float64
	heldUntil int64
	holder    *group
}

// heldAt is how many tokens are held for a group at now (Unix ns).
func (b *bucket) heldAt(now int64) float64 {
	if b.held != 0 && now >= b.heldUntil {
		b.held, b.holder = 0, nil
	}
	return b.held
}

// burstOf is the capacity of a queue's rate bucket.
func burstOf(cfg broker.QueueConfig) float64 {
	if cfg.RateBurst > 0 {
		return float64(cfg.RateBurst)
	}
	return float64(cfg.RatePerSecond)
}

func (b *bucket) refill(now time.Time, cfg broker.QueueConfig) {
	burst := burstOf(cfg)
	t := now.UnixNano()
	if b.last == 0 {
		b.tokens, b.last = burst, t
		return
	}
	if t > b.last {
		b.tokens = math.Min(burst, b.tokens+float64(t-b.last)*float64(cfg.RatePerSecond)/1e9)
		b.last = t
	}
}

// armRefillLocked wakes q's sessions when its bucket holds want tokens
// again (a task needs one, a fired group one per member), unless a timer
// armed already fires no later. It returns when that is, in the bucket's
// clock.
func (e *Engine) armRefillLocked(q *queue, want float64) int64 {
	wait := max(time.Duration((want-q.bucket.tokens)*1e9/float64(q.cfg.RatePerSecond)), time.Millisecond)
	at := q.bucket.last + int64(wait)
	if q.bucket.wakeAt != 0 && q.bucket.wakeAt <= at {
		return at
	}
	q.bucket.wakeAt = at
	time.AfterFunc(wait, func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		if q.bucket.wakeAt == at {
			q.bucket.wakeAt = 0
		}
		if !e.closed && (q.readyN > 0 || q.fired.len() > 0) && !q.paused {
			e.note.TasksReady(q.name)
		}
	})
	return at
}

// configChangedLocked applies a queue's new configuration: keys may admit
// more held tasks, the rate bucket starts over, and the groups gathering
// follow the new group policy.
func (e *Engine) configChangedLocked(q *queue) {
	q.bucket = bucket{}
	e.policyChangedLocked(q)
	for id, c := range e.ckeys {
		if id.queue == q.index {
			e.admitHeldLocked(c)
		}
	}
}
