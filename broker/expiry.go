package broker

import "time"

// ExpiryOf is the contract's rule for when a waiting task with expiry
// expires and deadline deadline is archived instead of run: at the
// earlier of the two that are set (zero: neither is, never). deadlineFirst
// says the deadline is that time, coming strictly before the expiry (or
// alone): the task's last error is then DeadlinePassedMessage (see
// ExpiryMessage).
func ExpiryOf(expires, deadline time.Time) (at time.Time, deadlineFirst bool) {
	if !deadline.IsZero() && (expires.IsZero() || deadline.Before(expires)) {
		return deadline, true
	}
	return expires, false
}

// Expired is the contract's rule for a waiting task whose ExpiryOf is at:
// at now it is archived, not run, once at is set and not after now. Every
// engine applies it when it would hand the task to a worker (Lease,
// LeaseGroups), when the task comes back to wait (a retry, a release, a
// dependency done) and when PromoteDue reaches at; no attempt is counted.
func Expired(at, now time.Time) bool {
	return !at.IsZero() && !at.After(now)
}

// ExpiryMessage is the last error of a task Expired archived:
// DeadlinePassedMessage when its deadline came first (ExpiryOf's
// deadlineFirst), else ExpiredMessage.
func ExpiryMessage(deadlineFirst bool) string {
	if deadlineFirst {
		return DeadlinePassedMessage
	}
	return ExpiredMessage
}
