package broker

import (
	"math/rand/v2"
	"time"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
)

// Default retry backoff: exponential from DefaultBackoffBase, doubling per
// failed attempt, capped at DefaultBackoffMax, with "equal jitter" (the
// delay is uniformly random in [d/2, d]) so that tasks that failed together
// do not all come back at the same instant.
const (
	DefaultBackoffBase = 5 * time.Second
	DefaultBackoffMax  = time.Hour
)

// Backoff returns how long a task that has failed retried times before this
// failure waits before its next attempt, under policy (nil or unspecified
// strategy means the default above). The strategies:
//   - EXPONENTIAL: base * 2^retried, capped at max, with equal jitter.
//   - LINEAR: base * (retried + 1), capped at max, no jitter.
//   - FIXED: base, no jitter.
//
// An unset base means DefaultBackoffBase; an unset max means
// DefaultBackoffMax.
func Backoff(policy *conveyorv1.RetryPolicy, retried int32) time.Duration {
	base, limit := DefaultBackoffBase, DefaultBackoffMax
	strategy := conveyorv1.RetryStrategy_RETRY_STRATEGY_EXPONENTIAL
	if policy != nil {
		if policy.GetBase() != nil && policy.GetBase().AsDuration() > 0 {
			base = policy.GetBase().AsDuration()
		}
		if policy.GetMax() != nil && policy.GetMax().AsDuration() > 0 {
			limit = policy.GetMax().AsDuration()
		}
		if policy.GetStrategy() != conveyorv1.RetryStrategy_RETRY_STRATEGY_UNSPECIFIED {
			strategy = policy.GetStrategy()
		}
	}
	retried = max(retried, 0)
	switch strategy {
	case conveyorv1.RetryStrategy_RETRY_STRATEGY_FIXED:
		return base
	case conveyorv1.RetryStrategy_RETRY_STRATEGY_LINEAR:
		if time.Duration(retried+1) > limit/base {
			return limit // base * (retried+1) would pass the cap (or overflow)
		}
		return base * time.Duration(retried+1)
	default:
		d := limit
		if retried < 62 && base <= limit>>uint(retried) {
			d = base << uint(retried)
		}
		half := d / 2
		return half + rand.N(d-half+1)
	}
}
