package postgres

import (
	"time"

	"github.com/conveyor-dev/conveyor/broker"
)

// This file is a queue's rate limit: the contract's token bucket
// (broker.RateBucket) on its dispatches, kept in memory like the other
// hints, and the wake of the queue's sessions when it refilled: the
// refill time is one of the times PromoteDue returns (the engine keeps no
// timer of its own), and PromoteDue wakes the queue then, as bolt does.
// A group holding tokens is named by its gid.

// bucket is a queue's rate bucket.
type bucket struct {
	broker.RateBucket[int64]
	// wakeAt is when PromoteDue is to wake the queue's sessions for the
	// refill; 0: not waiting.
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
	reconfigure(&q.bucket.RateBucket, e.hints.clockStart, now, old, q.cfg)
}

// reconfigure carries bucket b over a change of its queue's rate from old
// to cfg at now, starting it first (as refillLocked does) if it ran under
// old: the memory's bucket and the database's (UpdateQueueConfig) alike.
func reconfigure(b *broker.RateBucket[int64], clockStart int64, now time.Time, old, cfg broker.QueueConfig) {
	if old.RatePerSecond > 0 {
		b.Start(clockStart, now.UnixNano())
	}
	b.Reconfigured(now.UnixNano(), old, cfg)
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
// members, go at now; when it must wait, its refill is waited for.
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

// armRefillLocked has PromoteDue wake q's sessions at at (Unix ns, in
// the callers' clock), unless a wake is due no later already. A wake
// earlier than the promoter was last told of signals TimersChanged.
func (e *Engine) armRefillLocked(q *queueHint, at int64) {
	if q.bucket.wakeAt != 0 && q.bucket.wakeAt <= at {
		return
	}
	q.bucket.wakeAt = at
	e.hints.rateWaits[q.name] = struct{}{}
	if e.hints.nextPromote == 0 || at < e.hints.nextPromote {
		e.hints.nextPromote = at
		e.note.TimersChanged()
	}
}

// wakeRefilledLocked wakes the sessions of the queues whose refill came
// by now and have work waiting, and returns the next refill to wait for
// (0: none). It visits the queues waiting for a refill only.
func (e *Engine) wakeRefilledLocked(now int64) int64 {
	next := int64(0)
	for name := range e.hints.rateWaits {
		q := e.hints.queues[name]
		if q != nil && q.bucket.wakeAt > now {
			earliest(&next, q.bucket.wakeAt)
			continue
		}
		delete(e.hints.rateWaits, name)
		if q == nil {
			continue
		}
		q.bucket.wakeAt = 0
		if !e.closed && !q.paused && (q.ready > 0 || len(q.fired) > 0) {
			e.note.TasksReady(q.name)
		}
	}
	return next
}
