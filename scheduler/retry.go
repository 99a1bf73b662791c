package scheduler

import (
	"math/rand/v2"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
)

// Default retry backoff: exponential from DefaultBackoffBase, doubling per
// failed attempt, capped at DefaultBackoffMax, with "equal jitter" (the
// delay is uniformly random in [d/2, d]) so that tasks that failed together
// do not all come back at the same instant.
const (
	DefaultBackoffBase = 5 * time.Second
	DefaultBackoffMax  = time.Hour
)

// BackoffFunc returns how long a task that has failed retried times before
// this failure waits before its next attempt, under policy (nil: the
// default).
type BackoffFunc func(policy *broker.RetryPolicy, retried int32) time.Duration

// Backoff is the default BackoffFunc. The strategies:
//   - exponential (and the default): base * 2^retried, capped at max, with
//     equal jitter;
//   - linear: base * (retried + 1), capped at max, no jitter;
//   - fixed: base, no jitter.
//
// A zero base means DefaultBackoffBase; a zero max means DefaultBackoffMax.
func Backoff(policy *broker.RetryPolicy, retried int32) time.Duration {
	base, limit := DefaultBackoffBase, DefaultBackoffMax
	strategy := broker.RetryExponential
	if policy != nil {
		if policy.Base > 0 {
			base = policy.Base
		}
		if policy.Max > 0 {
			limit = policy.Max
		}
		if policy.Strategy != broker.RetryDefault {
			strategy = policy.Strategy
		}
	}
	retried = max(retried, 0)
	switch strategy {
	case broker.RetryFixed:
		return base
	case broker.RetryLinear:
		// Counted in Duration: retried+1 in int32 wraps at the largest
		// retried, to a negative delay.
		n := time.Duration(retried) + 1
		if n > limit/base {
			return limit // base * n would pass the cap (or overflow)
		}
		return base * n
	default:
		d := limit
		if retried < 62 && base <= limit>>uint(retried) {
			d = base << uint(retried)
		}
		half := d / 2
		return half + rand.N(d-half+1)
	}
}

// Attempt is what the decisions below need to know of a leased task.
type Attempt struct {
	SessionID string
	Lease     broker.LeaseRef
	Retried   int32
	MaxRetry  int32
	Policy    *broker.RetryPolicy
}

// Retrier decides what a finished or lapsed attempt leads to. It is the one
// home of the retry rule.
type Retrier struct {
	// Backoff computes retry delays. Defaults to Backoff.
	Backoff BackoffFunc
}

// AfterResult decides on a worker's Result (protocol §5.8):
//   - SUCCESS: COMPLETED with the result bytes;
//   - RETRY: RETRY after the backoff with one more retry counted, or
//     ARCHIVED once the retries are spent (retried >= max_retry);
//   - SKIP_RETRY: ARCHIVED;
//   - RELEASED and anything else: PENDING at once, no retry counted.
func (r Retrier) AfterResult(a Attempt, outcome broker.Outcome, errMsg string, result []byte, now time.Time) broker.Decision {
	switch outcome {
	case broker.OutcomeSuccess:
		return broker.Completed(a.SessionID, a.Lease, now, result)
	case broker.OutcomeRetry:
		if a.Retried >= a.MaxRetry {
			return broker.Archived(a.SessionID, a.Lease, now, errMsg).WithVerdict()
		}
		backoff := r.Backoff
		if backoff == nil {
			backoff = Backoff
		}
		return broker.Retrying(a.SessionID, a.Lease, now, addSat(now, backoff(a.Policy, a.Retried)), errMsg).WithVerdict()
	case broker.OutcomeSkipRetry:
		return broker.Archived(a.SessionID, a.Lease, now, errMsg).WithVerdict()
	}
	return broker.Released(a.SessionID, a.Lease, now)
}

// Messages of a lapsed lease.
const (
	LapsedMessage  = "lease expired: the worker stopped heartbeating"
	OverranMessage = "the attempt ran past its timeout or deadline"
)

// AfterLapse decides on a lease the worker let lapse. A lapse counts as a
// failed attempt (the worker may have died because of the task), so a task
// that keeps killing its workers is archived once its retries are spent;
// otherwise it is pending again at once, with no backoff: the worker, not
// the task, is the likelier culprit.
func (r Retrier) AfterLapse(l broker.LapsedLease, now time.Time) broker.Decision {
	msg := LapsedMessage
	if l.Limited {
		msg = OverranMessage
	}
	if l.Retried >= l.MaxRetry {
		return broker.Archived(l.SessionID, l.Lease, now, msg)
	}
	return broker.Retrying(l.SessionID, l.Lease, now, now, msg)
}

// addSat is t + d, saturating instead of overflowing time.Time.
func addSat(t time.Time, d time.Duration) time.Time {
	if u := t.Add(d); !u.Before(t) {
		return u
	}
	return t.Add(1<<63 - 1)
}
