package brokertest

import (
	"testing"

	"github.com/conveyor-dev/conveyor/broker"
)

// recordPush records a push invocation of l's attempt (StartParams.Push).
func recordPush(t *testing.T, b broker.Broker, l broker.Lease) {
	t.Helper()
	a, ok := b.(broker.StartAuthorizer)
	if !ok {
		t.Fatalf("%T does not implement broker.StartAuthorizer", b)
	}
	if err := a.AuthorizeStart(t.Context(), broker.StartParams{SessionID: "push:q", Lease: Ref(l), Now: T0, Push: true}); err != nil {
		t.Fatalf("AuthorizeStart (push): %v", err)
	}
}

// testPushRestart: an attempt sent to a push endpoint when the server
// stops is counted at the restart (PENDING with one more retry, or
// ARCHIVED with none left); one leased but not sent is handed back
// uncounted; the mark does not outlive its attempt.
func testPushRestart(t *testing.T, e *Env) {
	b := e.B
	sent := EnqueueOne(t, b, T0, NewTask("q")).ID
	last := NewTask("q")
	last.MaxRetry = 0
	lastID := EnqueueOne(t, b, T0, last).ID
	unsent := EnqueueOne(t, b, T0, NewTask("q")).ID
	ls := Lease(t, b, "push:q", "q", 3, T0, TTL)
	if len(ls) != 3 {
		t.Fatalf("leased %d tasks, want 3", len(ls))
	}
	for _, l := range ls {
		if l.Task.ID != unsent {
			recordPush(t, b, l)
		}
	}
	b = e.Reopen()
	if task := RequireState(t, b, sent, broker.StatePending); task.Retried != 1 || task.LastError != broker.InterruptedPushError {
		t.Fatalf("the interrupted push: retried %d, last_error %q; want 1, %q", task.Retried, task.LastError, broker.InterruptedPushError)
	}
	if task := RequireState(t, b, lastID, broker.StateArchived); task.LastError != broker.InterruptedPushError {
		t.Fatalf("the interrupted push with no retry left: last_error %q", task.LastError)
	}
	if task := RequireState(t, b, unsent, broker.StatePending); task.Retried != 0 {
		t.Fatalf("a leased task never sent: retried %d, want 0", task.Retried)
	}
	// Leased again and not sent: the earlier mark is gone with its attempt.
	if ls := Lease(t, b, "push:q", "q", 2, T0, TTL); len(ls) != 2 {
		t.Fatalf("leased %d after the restart, want 2", len(ls))
	}
	b = e.Reopen()
	if task := RequireState(t, b, sent, broker.StatePending); task.Retried != 1 {
		t.Fatalf("an attempt not sent counted: retried %d, want 1", task.Retried)
	}
}
