package postgres

import (
	"time"

	"github.com/conveyor-dev/conveyor/broker"
)

// This file is a queue's rate limit: the contract's token bucket
// (broker.RateBucket) on its dispatches, kept in memory like the other
// hints, and the timer that wakes the queue's sessions when it refilled.
// A group holding tokens is named by its gid.

// bucket is a queue's rate bucket.
type bucket struct {
	broker.RateBucket[int64]
	// wakeAt is when the armed refill timer fires; 0: none.
	wakeAt int64
}

// refillLocked brings q's bucket to now under rate cfg, starting it empty
// (broker.RateBucket.Start) at the first time a caller gave the engine
// since it opened.
func (e *Engine) refillLocked(q *queueHint, now time.Time, cfg broker.QueueConfig) {
	q.bucket.Start(e.hints.clockStart, now.UnixNano())
	q.bucket.Refill(now.UnixNano(), cfg)
}

// rateChangedLocked carries q's bucket over a change of its rate from old.
func (e *Engine) rateChangedLocked(q *queueHint, now time.Time, old broker.QueueConfig) {
	if old.RatePerSecond > 0 {
		q.bucket.Start(e.hints.clockStart, now.UnixNano())
	}
	q.bucket.Reconfigured(now.UnixNano(), old, q.cfg)
}

// tookLocked records that n tasks of q were leased at now.
func (e *Engine) tookLocked(q *queueHint, n int, now time.Time) {
	if q.cfg.RatePerSecond <= 0 || n == 0 {
		return
	}
	e.refillLocked(q, now, q.cfg)
	if wake := q.bucket.Take(n, q.cfg); wake != 0 {
		e.armRefillLocked(q, wake)
	}
}

// groupTokensLocked reports whether q's bucket lets fired group gid, of n
// members, go at now; when it must wait, the refill timer is armed.
func (e *Engine) groupTokensLocked(q *queueHint, gid int64, n int, now time.Time) bool {
	if q.cfg.RatePerSecond <= 0 {
		return true
	}
	e.refillLocked(q, now, q.cfg)
	ok, wake := q.bucket.ForGroup(gid, n, now.UnixNano(), q.cfg)
	if !ok {
		e.armRefillLocked(q, wake)
	}
	return ok
}

// armRefillLocked wakes q's sessions at at (Unix ns, in the bucket's
// clock), unless a timer armed already fires no later.
func (e *Engine) armRefillLocked(q *queueHint, at int64) {
	if q.bucket.wakeAt != 0 && q.bucket.wakeAt <= at {
		return
	}
	q.bucket.wakeAt = at
	var t *time.Timer
	t = time.AfterFunc(time.Duration(at-q.bucket.Last), func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		delete(e.hints.timers, t)
		if q.bucket.wakeAt == at {
			q.bucket.wakeAt = 0
		}
		if !e.closed && !q.paused && (q.ready > 0 || len(q.fired) > 0) {
			e.note.TasksReady(q.name)
		}
	})
	e.hints.timers[t] = struct{}{}
}
