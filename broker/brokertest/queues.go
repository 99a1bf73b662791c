package brokertest

import (
	"context"
	"testing"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
)

func queueCases() []testCase {
	return []testCase{
		{name: "Counts", fn: testQueuesCounts},
		{name: "Info", fn: testInfo},
		{name: "Closed", fn: testClosed},
	}
}

func testQueuesCounts(t *testing.T, b broker.Broker) {
	if qs, err := b.Queues(t.Context()); err != nil || len(qs) != 0 {
		t.Fatalf("Queues of an empty broker = %v, %v", qs, err)
	}
	var batch []broker.NewTask
	for range 6 {
		batch = append(batch, NewTask("a"))
	}
	sched, grouped, dep := NewTask("a"), NewTask("a"), NewTask("a")
	sched.ProcessAt = at(time.Hour)
	grouped.Group = "g"
	batch = append(batch, sched, grouped)
	ts := Enqueue(t, b, T0, batch...)
	dep.DependsOn = []broker.Dependency{{TaskID: ts[5].ID}} // a task that stays pending
	EnqueueOne(t, b, T0, dep)
	Enqueue(t, b, T0, NewTask("b"), NewTask("b"))

	ls := Lease(t, b, "s1", "a", 4, T0, TTL)
	if len(ls) != 4 {
		t.Fatalf("leased %d, want 4", len(ls))
	}
	Succeed(t, b, "s1", ls[0], at(time.Second))
	Archive(t, b, "s1", ls[1], "bad", at(time.Second))
	Fail(t, b, "s1", ls[2], "flaky", at(time.Second), at(time.Minute))

	qs, err := b.Queues(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(qs) != 2 || qs[0].Name != "a" || qs[1].Name != "b" {
		t.Fatalf("Queues = %+v, want a and b in name order", qs)
	}
	RequireCounts(t, b, "a", Counts{
		scheduled: 1, pending: 2, active: 1, retry: 1, completed: 1, archived: 1, aggregating: 1, blocked: 1,
	})
	RequireCounts(t, b, "b", Counts{pending: 2})
	if qs[0].Processed != 3 || qs[0].Failed != 2 || qs[1].Processed != 0 || qs[1].Failed != 0 {
		t.Fatalf("Processed/Failed a=%d/%d b=%d/%d, want 3/2 and 0/0",
			qs[0].Processed, qs[0].Failed, qs[1].Processed, qs[1].Failed)
	}
	if qs[0].Paused || qs[1].Paused {
		t.Fatalf("queues paused without being asked")
	}

	if err := b.Release(t.Context(), broker.ReleaseParams{SessionID: "s1", Leases: []broker.LeaseRef{Ref(ls[3])}, Now: at(2 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.PromoteDue(t.Context(), at(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	RequireCounts(t, b, "a", Counts{pending: 5, completed: 1, archived: 1, aggregating: 1, blocked: 1})
	Purge(t, b, at(CompletedRetention+time.Hour))
	if c := Queue(t, b, "a").Counts; c[completed] != 0 || c[pending] != 5 {
		t.Fatalf("after Purge: completed %d pending %d, want 0 and 5", c[completed], c[pending])
	}
	if n := Ready(b, "a"); n != 5 {
		t.Fatalf("Ready = %d, want 5", n)
	}
}

func testInfo(t *testing.T, b broker.Broker) {
	Enqueue(t, b, T0, NewTask("a"), NewTask("a"), NewTask("b"))
	Succeed(t, b, "s1", LeaseOne(t, b, "s1", "a", T0), T0)
	LeaseOne(t, b, "s1", "b", T0)
	info, err := b.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if info.Engine == "" {
		t.Fatalf("Info.Engine is empty")
	}
	var want broker.Counts
	want[pending], want[active], want[completed] = 1, 1, 1
	if info.Counts != want {
		t.Fatalf("Info.Counts = %s, want %s", formatCounts(info.Counts), formatCounts(want))
	}
}

func testClosed(t *testing.T, b broker.Broker) {
	EnqueueOne(t, b, T0, NewTask("q"))
	l := LeaseOne(t, b, "s1", "q", T0)
	task := EnqueueOne(t, b, T0, NewTask("q"))
	if _, err := b.CreateCron(t.Context(), cronEntry("c")); err != nil {
		t.Fatalf("CreateCron: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	ctx := t.Context()
	check := func(what string, err error) {
		t.Helper()
		requireErrIs(t, what+" after Close", err, broker.ErrClosed)
	}
	fresh := WithStates([]broker.NewTask{NewTask("q")}, T0)
	_, err := b.Enqueue(ctx, broker.EnqueueParams{Tasks: fresh, Now: T0})
	check("Enqueue", err)
	_, err = b.EnqueueTx(ctx, broker.EnqueueParams{Tasks: fresh, Now: T0})
	check("EnqueueTx", err)
	_, err = b.GetTask(ctx, task.ID)
	check("GetTask", err)
	_, err = b.Lease(ctx, broker.LeaseParams{SessionID: "s1", Picks: []broker.QueuePick{{Queue: "q", N: 1}}, Now: T0, TTL: TTL})
	check("Lease", err)
	_, err = b.Extend(ctx, broker.ExtendParams{SessionID: "s1", Leases: []broker.LeaseRef{Ref(l)}, Now: T0, TTL: TTL})
	check("Extend", err)
	_, err = b.Complete(ctx, broker.Completed("s1", Ref(l), T0, nil))
	check("Complete", err)
	check("Release", b.Release(ctx, broker.ReleaseParams{SessionID: "s1", Leases: []broker.LeaseRef{Ref(l)}, Now: T0}))
	check("Progress", b.Progress(ctx, broker.ProgressParams{SessionID: "s1", Lease: Ref(l), Percent: 1}))
	_, err = b.PromoteDue(ctx, T0)
	check("PromoteDue", err)
	_, _, err = b.LapsedLeases(ctx, T0)
	check("LapsedLeases", err)
	check("Reclaim", b.Reclaim(ctx, []broker.Decision{broker.Released("s1", Ref(l), T0)}))
	_, err = b.Purge(ctx, PurgeAt(T0))
	check("Purge", err)
	_, err = b.SetQueuePaused(ctx, "q", true)
	check("SetQueuePaused", err)
	// A call that waited for a write no one will make would block until
	// its context ends: bound it, so that the answer is ErrClosed or a
	// failure, never a hang.
	bounded, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err = b.CreateCron(bounded, cronEntry("d"))
	check("CreateCron", err)
	_, err = b.UpdateCron(bounded, "c", pauseCron)
	check("UpdateCron", err)
	check("DeleteCron", b.DeleteCron(bounded, "c"))
}
