package broker_test

import (
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/conveyor-dev/conveyor/broker"
	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
)

func policy(strategy conveyorv1.RetryStrategy, base, limit time.Duration) *conveyorv1.RetryPolicy {
	p := &conveyorv1.RetryPolicy{Strategy: strategy}
	if base != 0 {
		p.Base = durationpb.New(base)
	}
	if limit != 0 {
		p.Max = durationpb.New(limit)
	}
	return p
}

const (
	unspecified = conveyorv1.RetryStrategy_RETRY_STRATEGY_UNSPECIFIED
	exponential = conveyorv1.RetryStrategy_RETRY_STRATEGY_EXPONENTIAL
	linear      = conveyorv1.RetryStrategy_RETRY_STRATEGY_LINEAR
	fixed       = conveyorv1.RetryStrategy_RETRY_STRATEGY_FIXED
)

func TestBackoffExact(t *testing.T) {
	tests := []struct {
		name    string
		policy  *conveyorv1.RetryPolicy
		retried int32
		want    time.Duration
	}{
		{"linear first retry waits base", policy(linear, 2*time.Second, time.Minute), 0, 2 * time.Second},
		{"linear grows by base", policy(linear, 2*time.Second, time.Minute), 1, 4 * time.Second},
		{"linear tenth", policy(linear, 2*time.Second, time.Minute), 9, 20 * time.Second},
		{"linear capped at max", policy(linear, 2*time.Second, 7*time.Second), 3, 7 * time.Second},
		{"linear huge retried capped", policy(linear, time.Second, time.Hour), 1 << 30, time.Hour},
		{"linear negative retried is 0", policy(linear, 3*time.Second, 0), -5, 3 * time.Second},
		{"linear default base", policy(linear, 0, 0), 2, 3 * broker.DefaultBackoffBase},
		{"linear default max", policy(linear, 20*time.Minute, 0), 5, broker.DefaultBackoffMax},
		{"fixed ignores retried", policy(fixed, 3*time.Second, 0), 0, 3 * time.Second},
		{"fixed ignores retried later", policy(fixed, 3*time.Second, 0), 17, 3 * time.Second},
		{"fixed is not capped", policy(fixed, 10*time.Second, time.Second), 4, 10 * time.Second},
		{"fixed default base", policy(fixed, 0, 0), 8, broker.DefaultBackoffBase},
		{"fixed negative base means default", &conveyorv1.RetryPolicy{Strategy: fixed, Base: durationpb.New(-time.Second)}, 0, broker.DefaultBackoffBase},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for range 20 {
				if got := broker.Backoff(tt.policy, tt.retried); got != tt.want {
					t.Fatalf("Backoff(%v, %d) = %s, want exactly %s", tt.policy, tt.retried, got, tt.want)
				}
			}
		})
	}
}

func TestBackoffExponential(t *testing.T) {
	tests := []struct {
		name    string
		policy  *conveyorv1.RetryPolicy
		retried int32
		// The delay is uniform in [lo, hi]: hi is the undithered delay
		// (base * 2^retried, capped) and lo half of it.
		lo, hi time.Duration
	}{
		{"default first retry", nil, 0, 2500 * time.Millisecond, 5 * time.Second},
		{"default second retry", nil, 1, 5 * time.Second, 10 * time.Second},
		{"default fourth retry", nil, 3, 20 * time.Second, 40 * time.Second},
		{"default capped at one hour", nil, 10, 30 * time.Minute, time.Hour},
		{"default far past the cap", nil, 1000, 30 * time.Minute, time.Hour},
		{"default negative retried is 0", nil, -1, 2500 * time.Millisecond, 5 * time.Second},
		{"unspecified strategy is exponential", policy(unspecified, time.Second, 0), 2, 2 * time.Second, 4 * time.Second},
		{"empty policy is the default", &conveyorv1.RetryPolicy{}, 0, 2500 * time.Millisecond, 5 * time.Second},
		{"custom base", policy(exponential, 100*time.Millisecond, 0), 4, 800 * time.Millisecond, 1600 * time.Millisecond},
		{"custom cap", policy(exponential, time.Second, 10*time.Second), 4, 5 * time.Second, 10 * time.Second},
		{"exactly at the cap", policy(exponential, time.Second, 8*time.Second), 3, 4 * time.Second, 8 * time.Second},
		{"base above max is capped", policy(exponential, time.Minute, 10*time.Second), 0, 5 * time.Second, 10 * time.Second},
		{"no overflow at 62 doublings", policy(exponential, time.Hour, 2*time.Hour), 62, time.Hour, 2 * time.Hour},
		{"no overflow with a large base", policy(exponential, 1<<40, 1<<62), 30, 1 << 61, 1 << 62},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			seen := map[time.Duration]bool{}
			for range 500 {
				got := broker.Backoff(tt.policy, tt.retried)
				if got < tt.lo || got > tt.hi {
					t.Fatalf("Backoff(%v, %d) = %s, want within [%s, %s]", tt.policy, tt.retried, got, tt.lo, tt.hi)
				}
				seen[got] = true
			}
			// Jitter: 500 draws from a range of billions of nanoseconds are
			// never all equal.
			if len(seen) < 2 {
				t.Fatalf("Backoff(%v, %d) returned one value 500 times: no jitter", tt.policy, tt.retried)
			}
		})
	}
}

func TestBackoffJitterSpread(t *testing.T) {
	// Equal jitter spreads over the whole upper half: with 2000 draws, both
	// quarters of [d/2, d] are hit (each has probability 1/2 per draw).
	const d = 40 * time.Second
	var low, high int
	for range 2000 {
		got := broker.Backoff(policy(exponential, 5*time.Second, 0), 3)
		if got < d*3/4 {
			low++
		} else {
			high++
		}
	}
	if low == 0 || high == 0 {
		t.Fatalf("draws below 3d/4: %d, above: %d; want both", low, high)
	}
}
