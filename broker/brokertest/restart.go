package brokertest

import (
	"errors"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/conveyor-dev/conveyor/broker"
)

func restartCases() []testCase {
	return []testCase{
		{name: "KeepsEverything", env: testRestartKeepsEverything},
		{name: "ActiveBecomesPending", env: testRestartActiveBecomesPending},
		{name: "EnqueueDurableOnReturn", env: testRestartEnqueueDurable},
		{name: "UniqueClaimWhateverTheIDOrder", env: testRestartUniqueClaimOrder},
		{name: "UniqueClaimOfARunTask", env: testRestartUniqueClaimOfRun},
	}
}

// restartFixture is a store holding a task in every state, and what the
// test expects of each after a restart.
type restartFixture struct {
	pending, urgent, sched, retrying, running, done, doneNoRetention, dead, grouped, blocked, expiring, paused string
}

func (f restartFixture) ids() []string {
	return []string{f.pending, f.urgent, f.sched, f.retrying, f.running, f.done, f.doneNoRetention,
		f.dead, f.grouped, f.blocked, f.expiring, f.paused}
}

// populate fills b with one task per state (times from T0), in queues "q"
// and "paused" (paused), and an empty paused-then-resumed queue "idle".
func populate(t *testing.T, b broker.Broker) restartFixture {
	t.Helper()
	var f restartFixture

	running := NewTask("q")
	running.MaxRetry = 5
	f.running = EnqueueOne(t, b, T0, running).ID
	// Two lapsed leases: retried 2, then leased again and left running.
	for i := range 2 {
		now := T0.Add(time.Duration(i) * 2 * TTL)
		LeaseOne(t, b, "s-old", "q", now)
		if lapsed := Reap(t, b, now.Add(TTL)); len(lapsed) != 1 {
			t.Fatalf("Reap = %v", lapsed)
		}
	}
	l := LeaseOne(t, b, "s1", "q", T0.Add(5*time.Minute))
	if l.Task.ID != f.running || l.Task.Retried != 2 {
		t.Fatalf("leased %s retried %d, want %s retried 2", l.Task.ID, l.Task.Retried, f.running)
	}
	if err := b.Progress(t.Context(), broker.ProgressParams{SessionID: "s1", Lease: Ref(l), Percent: 30, Message: "a third"}); err != nil {
		t.Fatal(err)
	}

	f.retrying = EnqueueOne(t, b, T0, NewTask("q")).ID
	Fail(t, b, "s1", LeaseOne(t, b, "s1", "q", T0), "flaky", T0.Add(time.Second), T0.Add(30*time.Minute))

	f.done = EnqueueOne(t, b, T0, NewTask("q")).ID
	ld := LeaseOne(t, b, "s1", "q", T0)
	Decide(t, b, broker.Completed("s1", Ref(ld), T0.Add(2*time.Second), []byte("the result")))
	zero := time.Duration(0)
	noRetention := NewTask("q")
	noRetention.Retention = &zero
	f.doneNoRetention = EnqueueOne(t, b, T0, noRetention).ID
	Succeed(t, b, "s1", LeaseOne(t, b, "s1", "q", T0), T0.Add(3*time.Second))
	// One more completed with no retention, purged before the restart, so
	// the persisted counts have seen a decrement.
	purged := EnqueueOne(t, b, T0, noRetention)
	Succeed(t, b, "s1", LeaseOne(t, b, "s1", "q", T0), T0)
	Purge(t, b, T0)
	if _, err := b.GetTask(t.Context(), purged.ID); !errors.Is(err, broker.ErrNotFound) {
		t.Fatalf("GetTask of the purged task: %v", err)
	}

	f.dead = EnqueueOne(t, b, T0, NewTask("q")).ID
	Archive(t, b, "s1", LeaseOne(t, b, "s1", "q", T0), "bad input", T0.Add(time.Second))

	// Waiting tasks.
	p := NewTask("q")
	p.UniqueKey = "uk-pending"
	p.Metadata = map[string]string{"k": "v"}
	f.pending = EnqueueOne(t, b, T0, p).ID
	urgent := NewTask("q")
	urgent.Priority = 9
	f.urgent = EnqueueOne(t, b, T0, urgent).ID
	s := NewTask("q")
	s.ProcessAt = T0.Add(10 * time.Minute)
	s.UniqueKey = "uk-scheduled"
	f.sched = EnqueueOne(t, b, T0, s).ID
	g := NewTask("q")
	g.Group = "g"
	f.grouped = EnqueueOne(t, b, T0, g).ID
	bl := NewTask("q")
	bl.DependsOn = []broker.Dependency{{TaskID: f.pending}}
	f.blocked = EnqueueOne(t, b, T0, bl).ID
	x := NewTask("q")
	x.ExpiresAt = T0.Add(7 * time.Minute)
	f.expiring = EnqueueOne(t, b, T0, x).ID

	if _, err := b.SetQueuePaused(t.Context(), "paused", true); err != nil {
		t.Fatal(err)
	}
	f.paused = EnqueueOne(t, b, T0, NewTask("paused")).ID
	if _, err := b.SetQueuePaused(t.Context(), "idle", true); err != nil {
		t.Fatal(err)
	}
	if _, err := b.SetQueuePaused(t.Context(), "idle", false); err != nil {
		t.Fatal(err)
	}
	return f
}

func testRestartKeepsEverything(t *testing.T, e *Env) {
	b := e.B
	f := populate(t, b)
	RequireCounts(t, b, "q", Counts{pending: 3, scheduled: 1, active: 1, retry: 1,
		completed: 2, archived: 1, aggregating: 1, blocked: 1})
	before := map[string]*broker.Task{}
	for _, id := range f.ids() {
		before[id] = GetTask(t, b, id)
	}
	queuesBefore, err := b.Queues(t.Context())
	if err != nil {
		t.Fatal(err)
	}

	b = e.Reopen()
	for _, id := range f.ids() {
		want := *before[id]
		if id == f.running {
			// The session that held it is gone: pending again, and that
			// is not the task's fault.
			want.State, want.SessionID, want.LeaseToken = pending, "", 0
		}
		RequireSameTask(t, "task "+id+" after restart", GetTask(t, b, id), &want)
	}
	queuesAfter, err := b.Queues(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(queuesAfter) != len(queuesBefore) {
		t.Fatalf("queues after restart %+v, before %+v", queuesAfter, queuesBefore)
	}
	for i, qa := range queuesAfter {
		qb := queuesBefore[i]
		wantCounts := qb.Counts
		wantCounts[pending] += wantCounts[active]
		wantCounts[active] = 0
		if qa.Name != qb.Name || qa.Paused != qb.Paused || qa.Counts != wantCounts {
			t.Fatalf("queue after restart %+v, want %+v with ACTIVE counted as PENDING", qa, qb)
		}
		if qa.Processed != qb.Processed || qa.Failed != qb.Failed {
			t.Fatalf("queue %q: processed/failed %d/%d after restart, want %d/%d (they persist)",
				qa.Name, qa.Processed, qa.Failed, qb.Processed, qb.Failed)
		}
	}
	if q := Queue(t, b, "q"); q.Processed != 5 || q.Failed != 2 {
		t.Fatalf("queue q processed/failed %d/%d, want 5/2 (three successes, a failure, an archive)", q.Processed, q.Failed)
	}
	if len(queuesAfter) != 3 || queuesAfter[0].Name != "idle" || !queuesAfter[1].Paused {
		t.Fatalf("queues after restart = %+v, want idle, paused (paused) and q", queuesAfter)
	}
	if n := Ready(b, "paused"); n != 0 {
		t.Fatalf("Ready(paused) = %d after restart", n)
	}
	// Unique claims survive, and so do ids of terminal tasks.
	for _, uk := range []string{"uk-pending", "uk-scheduled"} {
		nt := NewTask("q")
		nt.UniqueKey = uk
		res := enqueueResults(t, b, T0.Add(time.Minute), nt)
		requireItemErr(t, res, 0, broker.ErrAlreadyExists)
	}
	dup := NewTask("q")
	dup.ID = f.done
	requireItemErr(t, enqueueResults(t, b, T0, dup), 0, broker.ErrAlreadyExists)

	// Timers are rebuilt: the expiry (T0+7m) is next, then the schedule.
	next, err := b.PromoteDue(t.Context(), T0.Add(6*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if !next.Equal(T0.Add(7 * time.Minute)) {
		t.Fatalf("PromoteDue next = %v, want the expiry at T0+7m", next)
	}
	if _, err := b.PromoteDue(t.Context(), T0.Add(10*time.Minute)); err != nil {
		t.Fatal(err)
	}
	RequireState(t, b, f.expiring, archived)
	RequireState(t, b, f.sched, pending)
	ls := Lease(t, b, "s2", "q", 10, T0.Add(10*time.Minute), TTL)
	if len(ls) != 4 || ls[0].Task.ID != f.urgent {
		t.Fatalf("leased %d tasks after restart (first %v), want 4 with the priority-9 task first", len(ls), ls)
	}
	retrying := RequireState(t, b, f.retrying, retry)
	if _, err := b.PromoteDue(t.Context(), retrying.NextProcessAt); err != nil {
		t.Fatal(err)
	}
	RequireState(t, b, f.retrying, pending)

	// The purge indexes survive: the zero-retention task goes first, the
	// others when the horizon passes them.
	Purge(t, b, T0.Add(time.Hour))
	if _, err := b.GetTask(t.Context(), f.doneNoRetention); !errors.Is(err, broker.ErrNotFound) {
		t.Fatalf("zero-retention task after Purge: %v", err)
	}
	RequireState(t, b, f.done, completed)
	Purge(t, b, T0.Add(CompletedRetention+time.Hour))
	if _, err := b.GetTask(t.Context(), f.done); !errors.Is(err, broker.ErrNotFound) {
		t.Fatalf("completed task after Purge past its retention: %v", err)
	}
	RequireCounts(t, b, "q", Counts{pending: 1, active: 4, archived: 2, aggregating: 1, blocked: 1})

	// The counts it persisted are right on the next restart too.
	b = e.Reopen()
	RequireCounts(t, b, "q", Counts{pending: 5, archived: 2, aggregating: 1, blocked: 1})
}

// testRestartActiveBecomesPending: a task running when the store closed is
// pending again after it opens, with no retry counted and no lease left.
func testRestartActiveBecomesPending(t *testing.T, e *Env) {
	task := EnqueueOne(t, e.B, T0, NewTask("q"))
	l := LeaseOne(t, e.B, "s1", "q", T0)
	b := e.Reopen()
	got := RequireState(t, b, task.ID, pending)
	if got.Retried != 0 {
		t.Fatalf("retried %d after a restart, want 0", got.Retried)
	}
	_, err := b.Complete(t.Context(), broker.Completed("s1", Ref(l), T0, nil))
	requireErrIs(t, "Complete with a lease from before the restart", err, broker.ErrLeaseLost)
	if lapsed, _, err := b.LapsedLeases(t.Context(), T0.Add(time.Hour)); err != nil || len(lapsed) != 0 {
		t.Fatalf("LapsedLeases after a restart = %v, %v; want none", lapsed, err)
	}
	if n := Ready(b, "q"); n != 1 {
		t.Fatalf("Ready = %d after the restart, want 1", n)
	}
}

// testRestartEnqueueDurable: what Enqueue and EnqueueTx returned is there
// after a restart.
func testRestartEnqueueDurable(t *testing.T, e *Env) {
	a := EnqueueOne(t, e.B, T0, NewTask("q"))
	tx, err := e.B.EnqueueTx(t.Context(), broker.EnqueueParams{Now: T0, Tasks: WithStates([]broker.NewTask{NewTask("q"), NewTask("r")}, T0)})
	if err != nil {
		t.Fatal(err)
	}
	b := e.Reopen()
	for _, want := range append([]*broker.Task{a}, tx...) {
		RequireSameTask(t, "task "+want.ID+" after a restart", GetTask(t, b, want.ID), want)
	}
}

// testRestartUniqueClaimOrder: the live claim on a key wins the rebuild
// over an expired claim on the same key, even when the task holding the
// expired one has the larger (producer-chosen) id.
func testRestartUniqueClaimOrder(t *testing.T, e *Env) {
	old := NewTask("q")
	old.ID = ulid.MustNew(ulid.Timestamp(T0.Add(24*time.Hour)), nil).String() // sorts last
	old.UniqueKey, old.UniqueUntil = "k", T0.Add(time.Second)
	EnqueueOne(t, e.B, T0, old)
	holder := NewTask("q")
	holder.UniqueKey = "k"
	EnqueueOne(t, e.B, T0.Add(time.Minute), holder) // the first claim ran out
	b := e.Reopen()
	dup := NewTask("q")
	dup.UniqueKey = "k"
	requireItemErr(t, enqueueResults(t, b, T0.Add(2*time.Minute), dup), 0, broker.ErrAlreadyExists)
}

// testRestartUniqueClaimOfRun: a task run again by an operator takes its
// unique key back from a live task whose claim ran out; after a restart
// it still holds it, though the other task was enqueued after it.
func testRestartUniqueClaimOfRun(t *testing.T, e *Env) {
	holder := NewTask("q")
	holder.UniqueKey = "k"
	revived := EnqueueOne(t, e.B, T0, holder)
	Archive(t, e.B, "s1", LeaseOne(t, e.B, "s1", "q", T0), "dead", T0) // the key is free
	later := NewTask("q")
	later.UniqueKey, later.UniqueUntil, later.ProcessAt = "k", at(time.Minute), at(24*time.Hour)
	// It claims the key for a minute and stays scheduled; once the minute
	// is over, the archived task is run and takes the key back.
	EnqueueOne(t, e.B, at(10*time.Second), later)
	actOK(t, e.B, broker.ActionRun, at(2*time.Minute), revived.ID)
	dup := NewTask("q")
	dup.UniqueKey = "k"
	requireItemErr(t, enqueueResults(t, e.B, at(3*time.Minute), dup), 0, broker.ErrAlreadyExists)
	b := e.Reopen()
	RequireState(t, b, revived.ID, pending)
	requireItemErr(t, enqueueResults(t, b, at(3*time.Minute), dup), 0, broker.ErrAlreadyExists)
}
