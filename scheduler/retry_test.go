package scheduler_test

import (
	"math"
	"testing"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
	"github.com/conveyor-dev/conveyor/scheduler"
)

func policy(strategy broker.RetryStrategy, base, limit time.Duration) *broker.RetryPolicy {
	return &broker.RetryPolicy{Strategy: strategy, Base: base, Max: limit}
}

func TestBackoffExact(t *testing.T) {
	tests := []struct {
		name    string
		policy  *broker.RetryPolicy
		retried int32
		want    time.Duration
	}{
		{"linear first retry waits base", policy(broker.RetryLinear, 2*time.Second, time.Minute), 0, 2 * time.Second},
		{"linear grows by base", policy(broker.RetryLinear, 2*time.Second, time.Minute), 1, 4 * time.Second},
		{"linear tenth", policy(broker.RetryLinear, 2*time.Second, time.Minute), 9, 20 * time.Second},
		{"linear capped", policy(broker.RetryLinear, 2*time.Second, time.Minute), 100, time.Minute},
		{"linear without overflow", policy(broker.RetryLinear, time.Hour, 0), 1 << 30, scheduler.DefaultBackoffMax},
		{"linear at the largest retried", policy(broker.RetryLinear, 2*time.Second, time.Minute), math.MaxInt32, time.Minute},
		{"fixed", policy(broker.RetryFixed, 7*time.Second, 0), 12, 7 * time.Second},
		{"fixed default base", policy(broker.RetryFixed, 0, 0), 3, scheduler.DefaultBackoffBase},
		{"fixed ignores max", policy(broker.RetryFixed, time.Minute, time.Second), 0, time.Minute},
	}
	for _, tc := range tests {
		if got := scheduler.Backoff(tc.policy, tc.retried); got != tc.want {
			t.Errorf("%s: Backoff = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestBackoffExponentialJitter(t *testing.T) {
	for _, tc := range []struct {
		name    string
		policy  *broker.RetryPolicy
		retried int32
		d       time.Duration // the un-jittered delay
	}{
		{"default first", nil, 0, scheduler.DefaultBackoffBase},
		{"default third", nil, 2, 4 * scheduler.DefaultBackoffBase},
		{"default capped", nil, 40, scheduler.DefaultBackoffMax},
		{"huge retried", nil, 1 << 30, scheduler.DefaultBackoffMax},
		{"negative retried", nil, -3, scheduler.DefaultBackoffBase},
		{"unspecified strategy", policy(broker.RetryDefault, time.Second, 0), 1, 2 * time.Second},
		{"own base and max", policy(broker.RetryExponential, time.Second, 10*time.Second), 5, 10 * time.Second},
	} {
		seen := map[time.Duration]bool{}
		for range 200 {
			got := scheduler.Backoff(tc.policy, tc.retried)
			if got < tc.d/2 || got > tc.d {
				t.Fatalf("%s: Backoff = %v, want within [%v, %v]", tc.name, got, tc.d/2, tc.d)
			}
			seen[got] = true
		}
		if tc.d > time.Millisecond && len(seen) < 2 {
			t.Errorf("%s: 200 draws gave one value: no jitter", tc.name)
		}
	}
}

func TestAfterResult(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	r := scheduler.Retrier{Backoff: func(*broker.RetryPolicy, int32) time.Duration { return time.Minute }}
	a := scheduler.Attempt{SessionID: "s", Lease: broker.LeaseRef{TaskID: "t", Token: 7}, Retried: 1, MaxRetry: 3}
	spent := a
	spent.Retried = 3
	cases := []struct {
		name    string
		a       scheduler.Attempt
		outcome broker.Outcome
		kind    broker.DecisionKind
		due     time.Time
		verdict bool
	}{
		{"success", a, broker.OutcomeSuccess, broker.DecideComplete, time.Time{}, true},
		{"retry", a, broker.OutcomeRetry, broker.DecideRetry, now.Add(time.Minute), true},
		{"retry spent", spent, broker.OutcomeRetry, broker.DecideArchive, time.Time{}, true},
		{"skip retry", a, broker.OutcomeSkipRetry, broker.DecideArchive, time.Time{}, true},
		{"released", a, broker.OutcomeReleased, broker.DecideRelease, time.Time{}, false},
		{"unspecified", a, broker.OutcomeUnspecified, broker.DecideRelease, time.Time{}, false},
	}
	for _, tc := range cases {
		d := r.AfterResult(tc.a, tc.outcome, "boom", []byte("r"), now)
		if d.Kind != tc.kind || !d.Due.Equal(tc.due) || d.Verdict != tc.verdict || d.Lease != a.Lease || d.SessionID != "s" {
			t.Errorf("%s: %+v, want kind %d due %v verdict %v", tc.name, d, tc.kind, tc.due, tc.verdict)
		}
	}
	// A backoff that would overflow time saturates.
	huge := scheduler.Retrier{Backoff: func(*broker.RetryPolicy, int32) time.Duration { return 1<<63 - 1 }}
	if d := huge.AfterResult(a, broker.OutcomeRetry, "", nil, now); d.Due.Before(now.Add(200 * 365 * 24 * time.Hour)) {
		t.Errorf("a maximal backoff is due at %v", d.Due)
	}
}

func TestAfterLapse(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	var r scheduler.Retrier
	l := broker.LapsedLease{SessionID: "s", Lease: broker.LeaseRef{TaskID: "t", Token: 1}, Retried: 0, MaxRetry: 2}
	if d := r.AfterLapse(l, now); d.Kind != broker.DecideRetry || !d.Due.Equal(now) || d.Verdict || d.Error != scheduler.LapsedMessage {
		t.Errorf("lapse with retries left: %+v", d)
	}
	l.Limited, l.Retried = true, 2
	if d := r.AfterLapse(l, now); d.Kind != broker.DecideArchive || d.Error != scheduler.OverranMessage {
		t.Errorf("limited lapse with retries spent: %+v", d)
	}
}

func TestCanceledOverride(t *testing.T) {
	now := time.Now()
	ref := broker.LeaseRef{TaskID: "t", Token: 1}
	if d := broker.Completed("s", ref, now, nil).Canceled(); d.Kind != broker.DecideComplete {
		t.Errorf("success of a canceled task: %v", d.Kind)
	}
	if d := broker.Retrying("s", ref, now, now, "x").WithVerdict().Canceled(); d.Kind != broker.DecideArchive || d.Error != broker.CanceledMessage+"; the attempt failed: x" {
		t.Errorf("failure of a canceled task: %+v", d)
	}
	if d := broker.Retrying("s", ref, now, now, "lapsed").Canceled(); d.Kind != broker.DecideCancel {
		t.Errorf("lapse of a canceled task: %v", d.Kind)
	}
	if d := broker.Released("s", ref, now).Canceled(); d.Kind != broker.DecideCancel {
		t.Errorf("release of a canceled task: %v", d.Kind)
	}
}
