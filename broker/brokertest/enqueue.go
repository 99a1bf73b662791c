package brokertest

import (
	"errors"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/conveyor-dev/conveyor/broker"
)

func enqueueCases() []testCase {
	return []testCase{
		{name: "Pending", fn: testEnqueuePending},
		{name: "Scheduled", fn: testEnqueueScheduled},
		{name: "Aggregating", fn: testEnqueueAggregating},
		{name: "Blocked", fn: testEnqueueBlocked},
		{name: "ServerIDs", fn: testEnqueueServerIDs},
		{name: "DuplicateID", fn: testEnqueueDuplicateID},
		{name: "DuplicateIDTerminal", fn: testEnqueueDuplicateIDTerminal},
		{name: "DuplicateIDInCall", fn: testEnqueueDuplicateIDInCall},
		{name: "UniqueKeyHeld", fn: testEnqueueUniqueKeyHeld},
		{name: "UniqueKeyFreed", fn: testEnqueueUniqueKeyFreed},
		{name: "UniqueUntil", fn: testEnqueueUniqueUntil},
		{name: "BatchIndependence", fn: testEnqueueBatchIndependence},
		{name: "InputNotRetained", fn: testEnqueueInputNotRetained},
	}
}

// enqueueResults runs Enqueue at now and fails on a call-level error.
func enqueueResults(t *testing.T, b broker.Broker, now time.Time, tasks ...broker.NewTask) []broker.EnqueueResult {
	t.Helper()
	res, err := b.Enqueue(t.Context(), broker.EnqueueParams{Tasks: WithStates(tasks, now), Now: now})
	if err != nil {
		t.Fatalf("Enqueue: %v", err)
	}
	if len(res) != len(tasks) {
		t.Fatalf("Enqueue returned %d results for %d tasks", len(res), len(tasks))
	}
	return res
}

// requireItemErr fails unless results[i] failed with want and carries no task.
func requireItemErr(t *testing.T, res []broker.EnqueueResult, i int, want error) {
	t.Helper()
	if !errors.Is(res[i].Err, want) {
		t.Fatalf("results[%d].Err = %v, want %v", i, res[i].Err, want)
	}
	if res[i].Task != nil {
		t.Fatalf("results[%d] failed but carries task %s", i, res[i].Task.ID)
	}
}

func testEnqueuePending(t *testing.T, b broker.Broker) {
	now := T0
	nt := NewTask("q")
	nt.Type = "email:send"
	nt.Payload = []byte(`{"to":"a@example.com"}`)
	nt.Metadata = map[string]string{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "tenant": "t1"}
	nt.Priority = 7
	nt.MaxRetry = 3
	nt.UniqueKey = "email:a@example.com"
	nt.ExpiresAt = at(time.Hour)
	got := EnqueueOne(t, b, now, nt)

	if _, err := ulid.ParseStrict(got.ID); err != nil {
		t.Fatalf("server-assigned id %q is not a ULID: %v", got.ID, err)
	}
	want := &broker.Task{
		ID: got.ID, Queue: "q", Type: "email:send", Payload: nt.Payload, ContentType: "application/json",
		Metadata: nt.Metadata, State: pending, Priority: 7, MaxRetry: 3, UniqueKey: nt.UniqueKey,
		EnqueuedAt: now, NextProcessAt: got.NextProcessAt, ExpiresAt: nt.ExpiresAt,
	}
	RequireSameTask(t, "returned task", got, want)
	if !got.StartedAt.IsZero() || !got.CompletedAt.IsZero() || got.Retried != 0 || got.LastError != "" {
		t.Fatalf("new task has attempt fields set: %+v", got)
	}
	RequireSameTask(t, "stored task", GetTask(t, b, got.ID), got)
	if n := Ready(b, "q"); n != 1 {
		t.Fatalf("Ready = %d, want 1", n)
	}
	RequireCounts(t, b, "q", Counts{pending: 1})
}

func testEnqueueScheduled(t *testing.T, b broker.Broker) {
	later := NewTask("q")
	later.ProcessAt = at(10 * time.Minute)
	past := NewTask("q")
	past.ProcessAt = at(-time.Minute)
	ts := Enqueue(t, b, T0, later, past)

	if ts[0].State != scheduled {
		t.Fatalf("task with ProcessAt in the future is %s, want SCHEDULED", ts[0].State)
	}
	if !ts[0].NextProcessAt.Equal(later.ProcessAt) {
		t.Fatalf("scheduled NextProcessAt = %v, want %v", ts[0].NextProcessAt, later.ProcessAt)
	}
	if ts[1].State != pending {
		t.Fatalf("task with ProcessAt in the past is %s, want PENDING", ts[1].State)
	}
	stored := RequireState(t, b, ts[0].ID, scheduled)
	if !stored.NextProcessAt.Equal(later.ProcessAt) {
		t.Fatalf("stored NextProcessAt = %v, want %v", stored.NextProcessAt, later.ProcessAt)
	}
	RequireState(t, b, ts[1].ID, pending)
	if n := Ready(b, "q"); n != 1 {
		t.Fatalf("Ready = %d, want 1 (the scheduled task is not ready)", n)
	}
	ls := Lease(t, b, "s1", "q", 10, at(time.Minute), TTL)
	if len(ls) != 1 || ls[0].Task.ID != ts[1].ID {
		t.Fatalf("Lease got %d tasks, want only the pending one", len(ls))
	}
	RequireCounts(t, b, "q", Counts{scheduled: 1, active: 1})
}

func testEnqueueAggregating(t *testing.T, b broker.Broker) {
	nt := NewTask("q")
	nt.Group = "g1"
	task := EnqueueOne(t, b, T0, nt)
	if task.State != aggregating {
		t.Fatalf("task with a group is %s, want AGGREGATING", task.State)
	}
	RequireState(t, b, task.ID, aggregating)
	if _, err := b.PromoteDue(t.Context(), at(24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if n := Ready(b, "q"); n != 0 {
		t.Fatalf("Ready = %d, want 0", n)
	}
	if ls := Lease(t, b, "s1", "q", 10, at(24*time.Hour), TTL); len(ls) != 0 {
		t.Fatalf("leased an aggregating task")
	}
	RequireState(t, b, task.ID, aggregating)
	RequireCounts(t, b, "q", Counts{aggregating: 1})
}

func testEnqueueBlocked(t *testing.T, b broker.Broker) {
	dep := EnqueueOne(t, b, T0, NewTask("q"))
	nt := NewTask("q")
	nt.DependsOn = []broker.Dependency{{TaskID: dep.ID, OnFailure: broker.OnFailureBlock}}
	task := EnqueueOne(t, b, T0, nt)
	if task.State != blocked {
		t.Fatalf("task with dependencies is %s, want BLOCKED", task.State)
	}
	RequireState(t, b, task.ID, blocked)
	ls := Lease(t, b, "s1", "q", 10, T0, TTL)
	if len(ls) != 1 || ls[0].Task.ID != dep.ID {
		t.Fatalf("Lease got %d tasks, want only the dependency", len(ls))
	}
	RequireState(t, b, task.ID, blocked)
	RequireCounts(t, b, "q", Counts{active: 1, blocked: 1})
}

func testEnqueueServerIDs(t *testing.T, b broker.Broker) {
	var tasks []*broker.Task
	batch := make([]broker.NewTask, 5)
	for i := range batch {
		batch[i] = NewTask("q")
	}
	tasks = append(tasks, Enqueue(t, b, T0, batch...)...)
	tasks = append(tasks, Enqueue(t, b, T0, batch[:3]...)...)
	tasks = append(tasks, Enqueue(t, b, at(time.Millisecond), batch[:3]...)...)
	tasks = append(tasks, Enqueue(t, b, at(time.Hour), batch[:2]...)...)

	prev := ulid.ULID{}
	for i, task := range tasks {
		id, err := ulid.ParseStrict(task.ID)
		if err != nil {
			t.Fatalf("tasks[%d].ID %q is not a ULID: %v", i, task.ID, err)
		}
		if id.Compare(prev) <= 0 {
			t.Fatalf("tasks[%d].ID %s does not follow %s", i, id, prev)
		}
		prev = id
		RequireState(t, b, task.ID, pending)
	}
	if n := Ready(b, "q"); n != len(tasks) {
		t.Fatalf("Ready = %d, want %d", n, len(tasks))
	}
}

func testEnqueueDuplicateID(t *testing.T, b broker.Broker) {
	nt := NewTask("q")
	nt.ID = NewID()
	nt.Type = "first"
	first := EnqueueOne(t, b, T0, nt)
	if first.ID != nt.ID {
		t.Fatalf("producer-chosen id %s stored as %s", nt.ID, first.ID)
	}

	again := nt
	again.Type = "second"
	res := enqueueResults(t, b, at(time.Second), again)
	requireItemErr(t, res, 0, broker.ErrAlreadyExists)
	if got := GetTask(t, b, nt.ID); got.Type != "first" {
		t.Fatalf("duplicate enqueue changed the task: type %q", got.Type)
	}

	// Still a duplicate while running.
	LeaseOne(t, b, "s1", "q", at(2*time.Second))
	res = enqueueResults(t, b, at(3*time.Second), again)
	requireItemErr(t, res, 0, broker.ErrAlreadyExists)
	RequireCounts(t, b, "q", Counts{active: 1})
}

func testEnqueueDuplicateIDTerminal(t *testing.T, b broker.Broker) {
	done, dead := NewTask("q"), NewTask("q")
	done.ID, dead.ID = NewID(), NewID()
	Enqueue(t, b, T0, done, dead)
	for _, l := range Lease(t, b, "s1", "q", 2, T0, TTL) {
		if l.Task.ID == dead.ID {
			Archive(t, b, "s1", l, "bad", at(time.Second))
		} else {
			Succeed(t, b, "s1", l, at(time.Second))
		}
	}
	RequireState(t, b, done.ID, completed)
	RequireState(t, b, dead.ID, archived)

	res := enqueueResults(t, b, at(2*time.Second), done, dead)
	requireItemErr(t, res, 0, broker.ErrAlreadyExists)
	requireItemErr(t, res, 1, broker.ErrAlreadyExists)
	RequireState(t, b, done.ID, completed)
	RequireState(t, b, dead.ID, archived)
	if n := Ready(b, "q"); n != 0 {
		t.Fatalf("Ready = %d, want 0", n)
	}
}

func testEnqueueDuplicateIDInCall(t *testing.T, b broker.Broker) {
	a, a2 := NewTask("q"), NewTask("q")
	a.ID, a.Type = NewID(), "first"
	a2.ID, a2.Type = a.ID, "second"
	res := enqueueResults(t, b, T0, a, a2)
	if res[0].Err != nil || res[0].Task == nil || res[0].Task.ID != a.ID {
		t.Fatalf("results[0] = %+v, want the stored task", res[0])
	}
	requireItemErr(t, res, 1, broker.ErrAlreadyExists)
	if got := GetTask(t, b, a.ID); got.Type != "first" {
		t.Fatalf("stored type %q, want the first item's", got.Type)
	}
	RequireCounts(t, b, "q", Counts{pending: 1})
}

func testEnqueueUniqueKeyHeld(t *testing.T, b broker.Broker) {
	holder := NewTask("q")
	holder.UniqueKey = "report:42"
	holder.MaxRetry = 5
	h := EnqueueOne(t, b, T0, holder)

	dup := NewTask("q")
	dup.UniqueKey = holder.UniqueKey
	requireHeld := func(what string, now time.Time) {
		t.Helper()
		res := enqueueResults(t, b, now, dup)
		if !errors.Is(res[0].Err, broker.ErrAlreadyExists) {
			t.Fatalf("unique key held by a %s task: got %v, want ErrAlreadyExists", what, res[0].Err)
		}
	}
	requireHeld("PENDING", at(time.Second))

	l := LeaseOne(t, b, "s1", "q", at(2*time.Second))
	requireHeld("ACTIVE", at(3*time.Second))

	if st := Fail(t, b, "s1", l, "flaky", at(4*time.Second), at(time.Hour)); st != retry {
		t.Fatalf("a failure gave %s", st)
	}
	requireHeld("RETRY", at(5*time.Second))

	sched := NewTask("q")
	sched.UniqueKey = "later"
	sched.ProcessAt = at(time.Hour)
	EnqueueOne(t, b, T0, sched)
	dup2 := NewTask("q")
	dup2.UniqueKey = "later"
	res := enqueueResults(t, b, at(time.Second), dup2)
	requireItemErr(t, res, 0, broker.ErrAlreadyExists)

	RequireCounts(t, b, "q", Counts{retry: 1, scheduled: 1})
	if got := GetTask(t, b, h.ID); got.UniqueKey != holder.UniqueKey {
		t.Fatalf("UniqueKey = %q, want %q", got.UniqueKey, holder.UniqueKey)
	}
}

func testEnqueueUniqueKeyFreed(t *testing.T, b broker.Broker) {
	for _, end := range []struct {
		name string
		fn   func(l broker.Lease)
	}{
		{"completed", func(l broker.Lease) { Succeed(t, b, "s1", l, at(time.Second)) }},
		{"archived", func(l broker.Lease) { Archive(t, b, "s1", l, "bad", at(time.Second)) }},
	} {
		nt := NewTask("q")
		nt.UniqueKey = "k-" + end.name
		EnqueueOne(t, b, T0, nt)
		l := LeaseOne(t, b, "s1", "q", T0)
		end.fn(l)

		// The key is free again, and the new task holds it.
		next := EnqueueOne(t, b, at(2*time.Second), nt)
		if next.ID == l.Task.ID {
			t.Fatalf("re-enqueue returned the finished task")
		}
		res := enqueueResults(t, b, at(3*time.Second), nt)
		requireItemErr(t, res, 0, broker.ErrAlreadyExists)
		LeaseOne(t, b, "s1", "q", at(4*time.Second))
	}
}

func testEnqueueUniqueUntil(t *testing.T, b broker.Broker) {
	held := NewTask("q")
	held.UniqueKey = "ttl"
	held.UniqueUntil = at(time.Minute)
	EnqueueOne(t, b, T0, held)

	dup := NewTask("q")
	dup.UniqueKey = "ttl"
	res := enqueueResults(t, b, at(30*time.Second), dup)
	requireItemErr(t, res, 0, broker.ErrAlreadyExists)
	// The holder is still pending, but its claim has lapsed.
	EnqueueOne(t, b, at(2*time.Minute), dup)

	lapsed := NewTask("q")
	lapsed.UniqueKey = "lapsed"
	lapsed.UniqueUntil = at(-time.Second)
	EnqueueOne(t, b, T0, lapsed)
	EnqueueOne(t, b, T0, lapsed)
	RequireCounts(t, b, "q", Counts{pending: 4})
}

func testEnqueueBatchIndependence(t *testing.T, b broker.Broker) {
	existing := NewTask("q")
	existing.ID = NewID()
	holder := NewTask("q")
	holder.UniqueKey = "held"
	Enqueue(t, b, T0, existing, holder)

	ok1, dupID, dupKey, ok2 := NewTask("q"), NewTask("q"), NewTask("q"), NewTask("q")
	ok1.Type, ok2.Type = "ok1", "ok2"
	dupID.ID = existing.ID
	dupKey.UniqueKey = "held"
	res := enqueueResults(t, b, at(time.Second), ok1, dupID, dupKey, ok2)
	requireItemErr(t, res, 1, broker.ErrAlreadyExists)
	requireItemErr(t, res, 2, broker.ErrAlreadyExists)
	for _, i := range []int{0, 3} {
		if res[i].Err != nil || res[i].Task == nil {
			t.Fatalf("results[%d] = %+v, want a stored task", i, res[i])
		}
		got := RequireState(t, b, res[i].Task.ID, pending)
		if want := []string{"ok1", "", "", "ok2"}[i]; got.Type != want {
			t.Fatalf("results[%d] stored type %q, want %q", i, got.Type, want)
		}
	}
	if n := Ready(b, "q"); n != 4 {
		t.Fatalf("Ready = %d, want 4", n)
	}
}

func testEnqueueInputNotRetained(t *testing.T, b broker.Broker) {
	nt := NewTask("q")
	nt.Payload = []byte("original")
	nt.Metadata = map[string]string{"k": "v"}
	task := EnqueueOne(t, b, T0, nt)
	copy(nt.Payload, "XXXXXXXX")
	nt.Metadata["k"] = "changed"
	nt.Metadata["new"] = "x"

	got := GetTask(t, b, task.ID)
	if string(got.Payload) != "original" || len(got.Metadata) != 1 || got.Metadata["k"] != "v" {
		t.Fatalf("stored task changed with the caller's input: payload %q metadata %v", got.Payload, got.Metadata)
	}
	l := LeaseOne(t, b, "s1", "q", T0)
	if string(l.Task.Payload) != "original" || l.Task.Metadata["k"] != "v" {
		t.Fatalf("leased task changed with the caller's input: payload %q metadata %v", l.Task.Payload, l.Task.Metadata)
	}
}
