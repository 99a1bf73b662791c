package broker

import "time"

// UniqueHolds is the contract's rule for a unique key's claim: the task
// that claimed it, now in state holder (StateUnspecified when it is
// gone), holds it at now while that task is not terminal and the claim's
// TTL, until (zero: none, the claim lasts as long as the task), has not
// passed. A claim that no longer holds has lapsed: a new task, or one run
// again, may take the key. Every engine applies it at enqueue, and when
// an operator runs a task that has a unique key.
func UniqueHolds(holder State, until, now time.Time) bool {
	return holder.Valid() && !holder.Terminal() && (until.IsZero() || until.After(now))
}
