package broker_test

import (
	"testing"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
)

func TestLeaseLimit(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	grace := 5 * time.Second
	for _, tc := range []struct {
		name     string
		deadline time.Time
		timeout  time.Duration
		want     time.Time
	}{
		{"unbounded", time.Time{}, 0, time.Time{}},
		{"timeout", time.Time{}, 2 * time.Second, now.Add(7 * time.Second)},
		{"deadline", now.Add(time.Minute), 0, now.Add(time.Minute + grace)},
		{"the earlier of the two", now.Add(time.Minute), time.Hour, now.Add(time.Minute + grace)},
	} {
		if got := broker.LeaseLimit(tc.deadline, tc.timeout, now, grace); !got.Equal(tc.want) {
			t.Errorf("%s: LeaseLimit = %v, want %v", tc.name, got, tc.want)
		}
	}
	far := broker.LeaseLimit(time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC), 1<<63-1, now, grace)
	if far.Before(now.Add(100*365*24*time.Hour)) || far.After(time.Unix(0, 1<<63-1)) {
		t.Errorf("a far bound gives limit %v: it must saturate at the last Unix-nanosecond instant, not wrap", far)
	}
}
