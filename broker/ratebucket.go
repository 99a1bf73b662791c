package broker

import (
	"math"
	"time"
)

// RateBucket is the contract's rule for a queue's rate limit: a token
// bucket on its dispatches, one token per task leased, alone or as a fired
// group's member. It holds up to the burst (QueueConfig.RateBurst, 0
// meaning the rate), gains RatePerSecond tokens a second, and so lets at
// most burst + per_second × d tasks go over any interval of d. It is pure:
// times (Unix ns) are passed in, and it tells the engine when to wake the
// queue's sessions instead of keeping a timer. G names a fired group (the
// engine's own handle; its zero value names none).
//
// A group of n members needs n tokens at once; tasks leased alone would
// take each token as it comes and starve it, so a group that must wait
// holds the tokens it needs (ForGroup): tasks alone, and other groups,
// spend only the tokens above the hold until the group goes, or until
// HoldGrace after the bucket could have paid for it (its workers may be
// gone). A group of more members than the burst waits for a full bucket
// and leaves it in debt, which the next dispatches wait out.
type RateBucket[G comparable] struct {
	// Tokens is the bucket's content as of Last; below zero after a group
	// larger than the burst.
	Tokens float64
	// Last is when Tokens was reckoned (Unix ns); 0: not started.
	Last int64
	// Held tokens are kept for group Holder until HeldUntil; 0: none.
	Held      float64
	HeldUntil int64
	Holder    G
}

// HoldGrace is how long a group's hold of tokens outlasts the moment the
// bucket could pay for it.
const HoldGrace = time.Second

// BurstOf is the capacity of cfg's rate bucket.
func BurstOf(cfg QueueConfig) float64 {
	if cfg.RateBurst > 0 {
		return float64(cfg.RateBurst)
	}
	return float64(cfg.RatePerSecond)
}

// Start starts a bucket that has not started (Last 0) empty at at, or at
// now when at is 0 or later than now. An engine starts its buckets empty
// at the first time a caller gave it after it opened: its last run's
// dispatches may not be on record, and a bucket that started full would
// let a restart dispatch a second burst in the same second.
func (b *RateBucket[G]) Start(at, now int64) {
	if b.Last != 0 {
		return
	}
	b.Tokens, b.Last = 0, now
	if at != 0 && at < now {
		b.Last = at
	}
}

// Refill brings the bucket to now under cfg's rate (a time before Last
// changes nothing: a clock that went back grants no tokens).
func (b *RateBucket[G]) Refill(now int64, cfg QueueConfig) {
	if now > b.Last {
		b.Tokens = math.Min(BurstOf(cfg), b.Tokens+float64(now-b.Last)*float64(cfg.RatePerSecond)/1e9)
		b.Last = now
	}
}

// Reconfigured carries the bucket over a change of its queue's rate from
// old to cfg at now: it refills under the old rate, then keeps its
// tokens, up to the new burst, so no change (even one that leaves the
// rate as it was) grants another burst. A queue that had no limit gets a
// full bucket: the limit holds from now on.
func (b *RateBucket[G]) Reconfigured(now int64, old, cfg QueueConfig) {
	if old.RatePerSecond > 0 {
		b.Refill(now, old)
	} else {
		b.Tokens, b.Last = BurstOf(cfg), max(now, b.Last, 1)
	}
	if cfg.RatePerSecond > 0 {
		b.Tokens = math.Min(b.Tokens, BurstOf(cfg))
	}
}

// HeldAt is how many tokens are held for a group at now (a lapsed hold
// ends).
func (b *RateBucket[G]) HeldAt(now int64) float64 {
	var none G
	if b.Held != 0 && now >= b.HeldUntil {
		b.Held, b.Holder = 0, none
	}
	return b.Held
}

// Alone is how many of n tasks leased alone the bucket lets go at now
// (refilled already), and, when none, the time (Unix ns) it holds one
// beyond the held tokens: the engine wakes the queue's sessions then.
func (b *RateBucket[G]) Alone(n int64, now int64, cfg QueueConfig) (int64, int64) {
	held := b.HeldAt(now)
	n = max(min(n, int64(math.Floor(b.Tokens-held))), 0)
	if n == 0 {
		return 0, b.FullAt(held+1, cfg)
	}
	return n, 0
}

// Take spends n tokens (n tasks leased at now, refilled already), and
// tells when the bucket holds a token again if it is left with none (0:
// it has one).
func (b *RateBucket[G]) Take(n int, cfg QueueConfig) int64 {
	b.Tokens -= float64(n)
	if b.Tokens < 1 {
		return b.FullAt(1, cfg)
	}
	return 0
}

// ForGroup reports whether fired group g, of n members, may go at now
// (the bucket refilled already): it needs a token per member, or a full
// bucket when it has more members than the burst. Tokens held for another
// group are not its to spend. When g must wait, wake is when to look
// again, and the tokens it needs are held for it unless another group's
// hold is on. A group that goes leaves the spending to Take.
func (b *RateBucket[G]) ForGroup(g G, n int, now int64, cfg QueueConfig) (ok bool, wake int64) {
	var none G
	need := min(float64(n), BurstOf(cfg))
	held := b.HeldAt(now)
	if b.Holder == g {
		held = 0
	}
	if b.Tokens-held >= need {
		if b.Holder == g {
			b.Held, b.Holder = 0, none
		}
		return true, 0
	}
	if held != 0 {
		return false, b.FullAt(held+need, cfg)
	}
	paid := b.FullAt(need, cfg)
	b.Held, b.HeldUntil, b.Holder = need, paid+int64(HoldGrace), g
	return false, paid
}

// DropHold ends the hold for g, whose members all left: the tasks leased
// alone need not wait for it to lapse. It reports whether there was one.
func (b *RateBucket[G]) DropHold(g G) bool {
	var none G
	if b.Holder != g || b.Held == 0 {
		return false
	}
	b.Held, b.Holder = 0, none
	return true
}

// FullAt is when the bucket holds want tokens (at least a millisecond
// after Last), at cfg's rate.
func (b *RateBucket[G]) FullAt(want float64, cfg QueueConfig) int64 {
	wait := max(time.Duration((want-b.Tokens)*1e9/float64(cfg.RatePerSecond)), time.Millisecond)
	return b.Last + int64(wait)
}
