package broker_test

import (
	"testing"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
)

// TestExpiry states when a waiting task is archived instead of run: at
// the earlier of its expiry and deadline that are set, from that instant
// on, with the message of the one that came first (the expiry's on a tie).
func TestExpiry(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	var never time.Time
	for _, tc := range []struct {
		name              string
		expires, deadline time.Time
		at                time.Time
		deadlineFirst     bool
		expired           bool
	}{
		{"neither", never, never, never, false, false},
		{"expiry passed", now.Add(-time.Second), never, now.Add(-time.Second), false, true},
		{"expiry now", now, never, now, false, true},
		{"expiry to come", now.Add(time.Nanosecond), never, now.Add(time.Nanosecond), false, false},
		{"deadline alone", never, now, now, true, true},
		{"deadline first", now.Add(time.Hour), now, now, true, true},
		{"expiry first", now, now.Add(time.Hour), now, false, true},
		{"a tie is the expiry's", now, now, now, false, true},
		{"both to come", now.Add(2 * time.Hour), now.Add(time.Hour), now.Add(time.Hour), true, false},
	} {
		at, first := broker.ExpiryOf(tc.expires, tc.deadline)
		if !at.Equal(tc.at) || first != tc.deadlineFirst {
			t.Errorf("%s: ExpiryOf = %v, %v; want %v, %v", tc.name, at, first, tc.at, tc.deadlineFirst)
		}
		if got := broker.Expired(at, now); got != tc.expired {
			t.Errorf("%s: Expired(%v, now) = %v, want %v", tc.name, at, got, tc.expired)
		}
	}
	if broker.ExpiryMessage(true) != broker.DeadlinePassedMessage || broker.ExpiryMessage(false) != broker.ExpiredMessage {
		t.Error("ExpiryMessage: the deadline's message when it came first, else the expiry's")
	}
}

// TestUniqueHolds states when a unique key's claim lapses: its task
// ended (or is gone), or its TTL passed.
func TestUniqueHolds(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	var none time.Time
	for s := broker.StateUnspecified; s < broker.NumStates; s++ {
		live := s.Valid() && !s.Terminal()
		for _, tc := range []struct {
			until time.Time
			want  bool
		}{
			{none, live},
			{now.Add(time.Nanosecond), live},
			{now, false},
			{now.Add(-time.Hour), false},
		} {
			if got := broker.UniqueHolds(s, tc.until, now); got != tc.want {
				t.Errorf("UniqueHolds(%s, until %v) = %v, want %v", s, tc.until, got, tc.want)
			}
		}
	}
}
