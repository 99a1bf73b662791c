package bolt

import (
	"time"

	"github.com/conveyor-dev/conveyor/broker"
)

// This file is a queue's rate limit: the contract's token bucket
// (broker.RateBucket) on its dispatches, and the wake of the queue's
// sessions when it has refilled. The engine keeps no timer of its own:
// the refill time is one of the times PromoteDue returns, and the
// server's timer loop calls PromoteDue then, which wakes the queue.

// bucket is a queue's rate bucket; a fired group holding tokens is named
// by its *group.
type bucket = broker.RateBucket[*group]

// groupTokensLocked reports whether q's rate bucket lets fired group g,
// of n members, go at now (broker.RateBucket.ForGroup); when it must
// wait, its refill is waited for.
func (e *Engine) groupTokensLocked(q *queue, g *group, n int, now time.Time) bool {
	if q.cfg.RatePerSecond <= 0 {
		return true
	}
	e.refillLocked(q, now, q.cfg)
	ok, wake := q.bucket.ForGroup(g, n, now.UnixNano(), q.cfg)
	if !ok {
		e.armRefillLocked(q, wake)
	}
	return ok
}

// dropEmptyHoldLocked ends the hold of q's rate bucket when the group it
// is for has no members left (they were canceled, deleted or expired):
// the tasks leased alone need not wait for the hold to lapse.
func (e *Engine) dropEmptyHoldLocked(q *queue) {
	if g := q.bucket.Holder; g == nil || g.live > 0 || !q.bucket.DropHold(g) {
		return
	}
	if q.readyN > 0 && !q.paused {
		e.note.TasksReady(q.name)
	}
}

// tookLocked records that n tasks of q were leased at now (spending
// tokens).
func (e *Engine) tookLocked(q *queue, n int, now time.Time) {
	if q.cfg.RatePerSecond <= 0 || n == 0 {
		return
	}
	e.refillLocked(q, now, q.cfg)
	if wake := q.bucket.Take(n, q.cfg); wake != 0 && (q.readyN > 0 || q.fired.len() > 0) {
		e.armRefillLocked(q, wake)
	}
}

// refillLocked brings q's bucket to now under rate cfg, starting it empty
// (broker.RateBucket.Start) at the first time a caller gave the engine
// since it opened (e.clockStart, the server's first PromoteDue).
func (e *Engine) refillLocked(q *queue, now time.Time, cfg broker.QueueConfig) {
	q.bucket.Start(e.clockStart, now.UnixNano())
	q.bucket.Refill(now.UnixNano(), cfg)
}

// rateChangedLocked carries q's bucket over a change of its rate from old
// (broker.RateBucket.Reconfigured).
func (e *Engine) rateChangedLocked(q *queue, now time.Time, old broker.QueueConfig) {
	if old.RatePerSecond > 0 {
		q.bucket.Start(e.clockStart, now.UnixNano())
	}
	q.bucket.Reconfigured(now.UnixNano(), old, q.cfg)
}

// armRefillLocked has PromoteDue wake q's sessions at at (Unix ns, in
// the callers' clock), unless a wake is due no later already. A wake
// earlier than PromoteDue's last answer signals TimersChanged, so that
// the timer loop calls it in time.
func (e *Engine) armRefillLocked(q *queue, at int64) {
	if q.rateWakeAt != 0 && q.rateWakeAt <= at {
		return
	}
	q.rateWakeAt = at
	e.rateWaits[q] = struct{}{}
	if e.promoteNext == 0 || at < e.promoteNext {
		e.promoteNext = at
		e.note.TimersChanged()
	}
}

// wakeRefilledLocked wakes the sessions of the queues whose refill came
// by now and have work waiting, and returns the next refill to wait for
// (0: none). It visits the queues waiting for a refill only.
func (e *Engine) wakeRefilledLocked(now int64) int64 {
	next := int64(0)
	for q := range e.rateWaits {
		if q.rateWakeAt > now {
			if next == 0 || q.rateWakeAt < next {
				next = q.rateWakeAt
			}
			continue
		}
		q.rateWakeAt = 0
		delete(e.rateWaits, q)
		if (q.readyN > 0 || q.fired.len() > 0) && !q.paused {
			e.note.TasksReady(q.name)
		}
	}
	return next
}
