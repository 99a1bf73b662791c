package brokertest

import (
	"testing"

	"github.com/conveyor-dev/conveyor/broker"
)

// testPushRestart: an attempt leased to a push endpoint when the server
// stops is counted at the restart (PENDING with one more retry, or
// ARCHIVED with none left); one leased to a session is handed back
// uncounted; the mark does not outlive its attempt.
func testPushRestart(t *testing.T, e *Env) {
	b := e.B
	sent := EnqueueOne(t, b, T0, NewTask("q")).ID
	last := NewTask("q")
	last.MaxRetry = 0
	lastID := EnqueueOne(t, b, T0, last).ID
	if ls := leasePush(t, b, 2); len(ls) != 2 {
		t.Fatalf("leased %d tasks to the endpoint, want 2", len(ls))
	}
	unsent := EnqueueOne(t, b, T0, NewTask("q")).ID
	LeaseOne(t, b, "s", "q", T0)
	b = e.Reopen()
	if task := RequireState(t, b, sent, broker.StatePending); task.Retried != 1 || task.LastError != broker.InterruptedPushError {
		t.Fatalf("the interrupted push: retried %d, last_error %q; want 1, %q", task.Retried, task.LastError, broker.InterruptedPushError)
	}
	if task := RequireState(t, b, lastID, broker.StateArchived); task.LastError != broker.InterruptedPushError {
		t.Fatalf("the interrupted push with no retry left: last_error %q", task.LastError)
	}
	if task := RequireState(t, b, unsent, broker.StatePending); task.Retried != 0 {
		t.Fatalf("a session's task: retried %d, want 0", task.Retried)
	}
	// Leased again by a session: the earlier mark is gone with its attempt.
	if ls := Lease(t, b, "s", "q", 2, T0, TTL); len(ls) != 2 {
		t.Fatalf("leased %d after the restart, want 2", len(ls))
	}
	b = e.Reopen()
	if task := RequireState(t, b, sent, broker.StatePending); task.Retried != 1 {
		t.Fatalf("an attempt not sent counted: retried %d, want 1", task.Retried)
	}
}

// leasePush leases up to n tasks of queue q to its push endpoint.
func leasePush(t *testing.T, b broker.Broker, n int) []broker.Lease {
	t.Helper()
	ls, err := b.Lease(t.Context(), broker.LeaseParams{SessionID: "push:q", Picks: []broker.QueuePick{{Queue: "q", N: n}},
		Now: T0, TTL: TTL, Push: true})
	if err != nil {
		t.Fatalf("Lease (push): %v", err)
	}
	return ls
}
