package broker

import (
	"math"
	"time"
)

// AttemptBound is the contract's rule for the latest time an attempt that
// starts at start may run: the earlier of the task's deadline and start
// plus its timeout, or zero when it has neither. (The lease's expiry
// bounds the attempt too, but heartbeats move it.)
func AttemptBound(deadline time.Time, timeout time.Duration, start time.Time) time.Time {
	bound := deadline
	if timeout > 0 {
		if b := addSat(start, timeout); bound.IsZero() || b.Before(bound) {
			bound = b
		}
	}
	return bound
}

// LeaseLimit is the latest expiry any renewal may give the lease of an
// attempt of a task with deadline and timeout that starts at start: its
// AttemptBound plus grace, zero when unbounded. Heartbeats cannot keep such
// an attempt alive past it, so a worker that ignores its deadline loses
// the task to the reaper instead of holding it forever. Every engine
// applies it to each lease it grants (LeaseParams.LimitGrace).
func LeaseLimit(deadline time.Time, timeout time.Duration, start time.Time, grace time.Duration) time.Time {
	b := AttemptBound(deadline, timeout, start)
	if b.IsZero() {
		return b
	}
	return addSat(b, grace)
}

// addSat is t + d, saturating at the last instant a Unix-nanosecond time
// can hold instead of overflowing.
func addSat(t time.Time, d time.Duration) time.Time {
	last := time.Unix(0, math.MaxInt64)
	if u := t.Add(d); !u.Before(t) && !u.After(last) {
		return u
	}
	return last
}
