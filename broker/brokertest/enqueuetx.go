package brokertest

import (
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/conveyor-dev/conveyor/broker"
)

func enqueueTxCases() []testCase {
	return []testCase{
		{name: "RequestOrder", fn: testEnqueueTxOrder},
		{name: "UniqueKeyHeldAbortsAll", fn: testEnqueueTxUniqueHeld},
		{name: "SharedUniqueKey", fn: testEnqueueTxSharedKey},
		{name: "ExistingID", fn: testEnqueueTxExistingID},
		{name: "DuplicateIDInCall", fn: testEnqueueTxDuplicateIDInCall},
		{name: "Replay", fn: testEnqueueTxReplay},
	}
}

func testEnqueueTxOrder(t *testing.T, b broker.Broker) {
	items := []broker.NewTask{NewTask("q"), NewTask("q"), NewTask("q"), NewTask("other")}
	for i := range items {
		items[i].Type = string(rune('a' + i))
	}
	items[1].ID = NewID()
	items[2].ProcessAt = at(time.Hour)
	items[3].UniqueKey = "tx-key"
	out, err := b.EnqueueTx(t.Context(), broker.EnqueueParams{Tasks: WithStates(items, T0), Now: T0})
	if err != nil {
		t.Fatalf("EnqueueTx: %v", err)
	}
	if len(out) != len(items) {
		t.Fatalf("EnqueueTx returned %d tasks for %d items", len(out), len(items))
	}
	wantState := []broker.State{pending, pending, scheduled, pending}
	for i, task := range out {
		if task == nil || task.Type != items[i].Type || task.Queue != items[i].Queue || task.State != wantState[i] {
			t.Fatalf("tasks[%d] = %+v, want type %q in %q, %s", i, task, items[i].Type, items[i].Queue, wantState[i])
		}
		if _, err := ulid.ParseStrict(task.ID); err != nil {
			t.Fatalf("tasks[%d].ID %q is not a ULID", i, task.ID)
		}
		RequireSameTask(t, "stored task", GetTask(t, b, task.ID), task)
	}
	if out[1].ID != items[1].ID {
		t.Fatalf("producer-chosen id %s stored as %s", items[1].ID, out[1].ID)
	}
	RequireCounts(t, b, "q", Counts{pending: 2, scheduled: 1})
	RequireCounts(t, b, "other", Counts{pending: 1})
	dup := NewTask("q")
	dup.UniqueKey = "tx-key"
	requireItemErr(t, enqueueResults(t, b, T0, dup), 0, broker.ErrAlreadyExists)
}

// requireTxNothingStored checks that a failed EnqueueTx left no trace.
func requireTxNothingStored(t *testing.T, b broker.Broker, before []broker.QueueInfo, ids ...string) {
	t.Helper()
	for _, id := range ids {
		_, err := b.GetTask(t.Context(), id)
		requireErrIs(t, "GetTask of an item of a failed EnqueueTx", err, broker.ErrNotFound)
	}
	after, err := b.Queues(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before) {
		t.Fatalf("queues after a failed EnqueueTx: %+v, before: %+v", after, before)
	}
	for i := range after {
		if after[i] != before[i] {
			t.Fatalf("queue %q changed after a failed EnqueueTx:\n got %+v\nwant %+v", after[i].Name, after[i], before[i])
		}
	}
}

func testEnqueueTxUniqueHeld(t *testing.T, b broker.Broker) {
	holder := NewTask("q")
	holder.UniqueKey = "held"
	EnqueueOne(t, b, T0, holder)
	before, err := b.Queues(t.Context())
	if err != nil {
		t.Fatal(err)
	}

	a, held, c := NewTask("q"), NewTask("tx"), NewTask("tx")
	a.ID, c.ID = NewID(), NewID()
	held.UniqueKey = "held"
	out, err := b.EnqueueTx(t.Context(), broker.EnqueueParams{Tasks: WithStates([]broker.NewTask{a, held, c}, at(time.Second)), Now: at(time.Second)})
	requireErrIs(t, "EnqueueTx with a held unique key", err, broker.ErrAlreadyExists)
	if out != nil {
		t.Fatalf("failed EnqueueTx returned tasks: %v", out)
	}
	requireTxNothingStored(t, b, before, a.ID, c.ID)
	if n, m := Ready(b, "q"), Ready(b, "tx"); n != 1 || m != 0 {
		t.Fatalf("Ready q=%d tx=%d after a failed EnqueueTx, want 1 and 0", n, m)
	}
	// The ids were not burnt: the same items minus the conflict commit.
	Enqueue(t, b, at(2*time.Second), a, c)
}

func testEnqueueTxSharedKey(t *testing.T, b broker.Broker) {
	a, c := NewTask("q"), NewTask("q")
	a.ID, c.ID = NewID(), NewID()
	a.UniqueKey, c.UniqueKey = "shared", "shared"
	_, err := b.EnqueueTx(t.Context(), broker.EnqueueParams{Tasks: WithStates([]broker.NewTask{a, c}, T0), Now: T0})
	requireErrIs(t, "EnqueueTx with two items sharing a unique key", err, broker.ErrAlreadyExists)
	requireTxNothingStored(t, b, nil, a.ID, c.ID)
	if n := Ready(b, "q"); n != 0 {
		t.Fatalf("Ready = %d, want 0", n)
	}
	// The key was never claimed.
	free := NewTask("q")
	free.UniqueKey = "shared"
	EnqueueOne(t, b, at(time.Second), free)
}

func testEnqueueTxExistingID(t *testing.T, b broker.Broker) {
	live, done := NewTask("q"), NewTask("q")
	live.ID, done.ID = NewID(), NewID()
	live.Type, done.Type = "orig-live", "orig-done"
	live.UniqueKey = "live-key"
	Enqueue(t, b, T0, done)
	Succeed(t, b, "s1", LeaseOne(t, b, "s1", "q", T0), at(time.Second))
	Enqueue(t, b, at(time.Second), live)

	again, againDone := live, done
	again.Type, againDone.Type = "changed", "changed"
	n1, n2 := NewTask("q"), NewTask("q")
	n1.Type, n2.Type = "n1", "n2"
	out, err := b.EnqueueTx(t.Context(), broker.EnqueueParams{Tasks: WithStates([]broker.NewTask{n1, again, againDone, n2}, at(2*time.Second)), Now: at(2 * time.Second)})
	if err != nil {
		t.Fatalf("EnqueueTx with existing ids: %v", err)
	}
	if len(out) != 4 {
		t.Fatalf("EnqueueTx returned %d tasks, want 4", len(out))
	}
	if out[1].ID != live.ID || out[1].Type != "orig-live" || out[1].State != pending {
		t.Fatalf("tasks[1] = %+v, want the existing pending task", out[1])
	}
	if out[2].ID != done.ID || out[2].Type != "orig-done" || out[2].State != completed {
		t.Fatalf("tasks[2] = %+v, want the existing completed task", out[2])
	}
	if out[0].Type != "n1" || out[3].Type != "n2" || out[0].State != pending || out[3].State != pending {
		t.Fatalf("new items not stored in request order: %+v, %+v", out[0], out[3])
	}
	if out[0].Existed || !out[1].Existed || !out[2].Existed || out[3].Existed {
		t.Fatalf("Existed = %v, %v, %v, %v; want it set on the existing tasks only",
			out[0].Existed, out[1].Existed, out[2].Existed, out[3].Existed)
	}
	RequireState(t, b, out[0].ID, pending)
	RequireState(t, b, out[3].ID, pending)
	RequireCounts(t, b, "q", Counts{pending: 3, completed: 1})
}

func testEnqueueTxDuplicateIDInCall(t *testing.T, b broker.Broker) {
	first, second := NewTask("q"), NewTask("q")
	first.ID, first.Type = NewID(), "first"
	second.ID, second.Type = first.ID, "second"
	out, err := b.EnqueueTx(t.Context(), broker.EnqueueParams{Tasks: WithStates([]broker.NewTask{first, second}, T0), Now: T0})
	if err != nil {
		t.Fatalf("EnqueueTx repeating an id: %v", err)
	}
	if len(out) != 2 {
		t.Fatalf("EnqueueTx returned %d tasks, want 2", len(out))
	}
	// The repeat is a no-op that returns the task the call stored.
	for i, task := range out {
		if task.ID != first.ID || task.Type != "first" || task.State != pending {
			t.Fatalf("tasks[%d] = %+v, want the first item's task", i, task)
		}
	}
	if out[0].Existed || !out[1].Existed {
		t.Fatalf("Existed = %v, %v; want it set on the repeat only", out[0].Existed, out[1].Existed)
	}
	if got := GetTask(t, b, first.ID); got.Type != "first" {
		t.Fatalf("stored type %q, want the first item's", got.Type)
	}
	RequireCounts(t, b, "q", Counts{pending: 1})
	if n := Ready(b, "q"); n != 1 {
		t.Fatalf("Ready = %d, want 1", n)
	}
}

func testEnqueueTxReplay(t *testing.T, b broker.Broker) {
	// A producer retrying an EnqueueTx it is unsure about sends the same
	// items again: ids it chose and the unique keys they hold.
	items := []broker.NewTask{NewTask("q"), NewTask("q")}
	for i := range items {
		items[i].ID = NewID()
		items[i].UniqueKey = "replay-" + items[i].ID
	}
	first, err := b.EnqueueTx(t.Context(), broker.EnqueueParams{Tasks: WithStates(items, T0), Now: T0})
	if err != nil {
		t.Fatalf("EnqueueTx: %v", err)
	}
	second, err := b.EnqueueTx(t.Context(), broker.EnqueueParams{Tasks: WithStates(items, at(time.Second)), Now: at(time.Second)})
	if err != nil {
		t.Fatalf("replayed EnqueueTx: %v", err)
	}
	for i := range items {
		RequireSameTask(t, "replayed task", second[i], first[i])
	}
	RequireCounts(t, b, "q", Counts{pending: 2})
}
