package bolt

import (
	"math"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
)

// This file is a queue's rate limit: a token bucket on its dispatches,
// one token per task leased (alone or as a group's member), and the timer
// that wakes the queue's sessions when it has refilled.

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
	e.refillLocked(q, now, q.cfg)
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
	e.refillLocked(q, now, q.cfg)
	q.bucket.tokens -= float64(n)
	if q.bucket.tokens < 1 && (q.readyN > 0 || q.fired.len() > 0) {
		e.armRefillLocked(q, 1)
	}
}

// bucket is a token bucket for a queue's dispatches.
type bucket struct {
	tokens float64 // below 0 after a group of more members than the burst
	last   int64   // when tokens was computed (Unix ns); 0: not started (refillLocked)
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

// refillLocked brings q's bucket to now under rate cfg. A bucket not
// started yet (the queue's first dispatch since the engine opened) starts
// empty, at the first time a caller gave the engine (e.clockStart, the
// server's first PromoteDue) or else now: the dispatches of the engine's
// last run are not on disk (a lease is written after it is handed out),
// so a bucket that started full would let a restart dispatch a second
// burst within the same second, where one that starts empty keeps "at
// most burst + per_second × d over any interval of d" across restarts
// and crashes. The price is a first burst after a restart that is spread
// over burst / per_second.
func (e *Engine) refillLocked(q *queue, now time.Time, cfg broker.QueueConfig) {
	b, t := &q.bucket, now.UnixNano()
	if b.last == 0 {
		b.tokens, b.last = 0, t
		if s := e.clockStart; s != 0 && s < t {
			b.last = s
		}
	}
	if t > b.last {
		b.tokens = math.Min(burstOf(cfg), b.tokens+float64(t-b.last)*float64(cfg.RatePerSecond)/1e9)
		b.last = t
	}
}

// rateChangedLocked carries q's bucket over a change of its rate from
// old: it refills at now under the old rate, then keeps its tokens, up to
// the new burst. Starting it over (full) would let each configuration
// change, even one that changes nothing, dispatch another burst. A queue
// that had no limit gets a full burst: the limit holds from now on.
func (e *Engine) rateChangedLocked(q *queue, now time.Time, old broker.QueueConfig) {
	if old.RatePerSecond > 0 {
		e.refillLocked(q, now, old)
	} else {
		q.bucket.tokens, q.bucket.last = burstOf(q.cfg), max(now.UnixNano(), q.bucket.last, 1)
	}
	if q.cfg.RatePerSecond > 0 {
		q.bucket.tokens = math.Min(q.bucket.tokens, burstOf(q.cfg))
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
