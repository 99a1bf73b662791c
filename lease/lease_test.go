package lease_test

import (
	"testing"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
	"github.com/conveyor-dev/conveyor/lease"
)

func TestDispatchDeadline(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	expiry := now.Add(time.Minute)
	cases := []struct {
		name     string
		deadline time.Duration // from now; 0: none
		timeout  time.Duration // 0: none
		want     time.Time
	}{
		{"lease only", 0, 0, expiry},
		{"timeout first", 0, 10 * time.Second, now.Add(10 * time.Second)},
		{"timeout after the lease", 0, time.Hour, expiry},
		{"deadline first", 5 * time.Second, 10 * time.Second, now.Add(5 * time.Second)},
		{"timeout before the deadline", 30 * time.Second, 10 * time.Second, now.Add(10 * time.Second)},
		{"deadline after the lease", time.Hour, 0, expiry},
	}
	for _, tc := range cases {
		task := &broker.Task{Timeout: tc.timeout}
		if tc.deadline != 0 {
			task.Deadline = now.Add(tc.deadline)
		}
		if got := lease.DispatchDeadline(now, expiry, task); !got.Equal(tc.want) {
			t.Errorf("%s: DispatchDeadline = %v, want %v", tc.name, got, tc.want)
		}
	}
	if got := lease.HeartbeatInterval(time.Minute); got != 20*time.Second {
		t.Errorf("HeartbeatInterval(1m) = %v, want 20s", got)
	}
}
