package brokertest

import (
	"testing"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
)

func latencyCases() []testCase {
	return []testCase{
		{name: "OldestReadyAcrossPriorities", env: testOldestReady},
	}
}

func oldestReady(t *testing.T, b broker.Broker, queue string, now time.Time) time.Time {
	t.Helper()
	lr, ok := b.(broker.LatencyReporter)
	if !ok {
		t.Fatalf("%T does not implement broker.LatencyReporter", b)
	}
	at, err := lr.OldestReady(t.Context(), queue, now)
	if err != nil {
		t.Fatalf("OldestReady(%q): %v", queue, err)
	}
	return at
}

// testOldestReady: a queue's oldest ready task is the earliest made ready
// at any priority, not the next to be leased; leasing it moves the figure
// on; across a restart it is no later than when the task became ready; an
// empty or unknown queue has none.
func testOldestReady(t *testing.T, e *Env) {
	if at := oldestReady(t, e.B, "q", T0); !at.IsZero() {
		t.Fatalf("OldestReady of an unknown queue = %v, want none", at)
	}
	low := NewTask("q")
	low.Priority = 2
	Enqueue(t, e.B, T0, low)
	high := NewTask("q")
	high.Priority = 8
	Enqueue(t, e.B, T0.Add(time.Minute), high)
	Enqueue(t, e.B, T0.Add(2*time.Minute), NewTask("q"))
	now := T0.Add(3 * time.Minute)
	if at := oldestReady(t, e.B, "q", now); !at.Equal(T0) {
		t.Fatalf("OldestReady = %v, want %v (the low-priority task)", at, T0)
	}
	e.Reopen()
	if at := oldestReady(t, e.B, "q", now); at.IsZero() || at.After(T0) {
		t.Fatalf("OldestReady after a restart = %v, want a time no later than %v", at, T0)
	}
	// The high-priority task goes first; the low one still waits.
	if l := LeaseOne(t, e.B, "s", "q", now); l.Task.Priority != 8 {
		t.Fatalf("leased priority %d first, want 8", l.Task.Priority)
	}
	if at := oldestReady(t, e.B, "q", now); at.IsZero() || at.After(T0) {
		t.Fatalf("OldestReady with the low task waiting = %v, want no later than %v", at, T0)
	}
	LeaseOne(t, e.B, "s", "q", now)
	LeaseOne(t, e.B, "s", "q", now)
	if at := oldestReady(t, e.B, "q", now); !at.IsZero() {
		t.Fatalf("OldestReady with nothing ready = %v, want none", at)
	}
}
