package brokertest

import (
	"strings"
	"testing"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
)

func depCases() []testCase {
	return []testCase{
		{name: "BlockedUntilAllSucceed", fn: testDepsAllSucceed},
		{name: "OnFailureBlock", fn: testDepsOnFailureBlock},
		{name: "OnFailureCascadeCancel", fn: testDepsCascade},
		{name: "OnFailureContinue", fn: testDepsContinue},
		{name: "AlreadyFinished", fn: testDepsAlreadyFinished},
		{name: "Unknown", fn: testDepsUnknown},
		{name: "InsideEnqueueTx", fn: testDepsInTx},
		{name: "FanOut", fn: testDepsFanOut},
		{name: "Links", fn: testDepsLinks},
		{name: "DeletedDependency", fn: testDepsDeleted},
		{name: "DeletedDependentIDUsedAgain", env: testDepsDeletedDependentIDReused},
		{name: "SurviveRestart", env: testDepsRestart},
		{name: "StartedNotBeforeRelease", fn: testDepsStartedAfterRelease},
		{name: "StartedNotBeforeEveryDependency", fn: testDepsStartedAfterEveryDependency},
		{name: "GroupedJoinsOnRelease", env: testDepsGrouped},
		{name: "DelayKeptPastRelease", env: testDepsDelay},
	}
}

func dependent(queue string, on ...broker.Dependency) broker.NewTask {
	nt := NewTask(queue)
	nt.DependsOn = on
	return nt
}

func dep(id string, f broker.OnFailure) broker.Dependency {
	return broker.Dependency{TaskID: id, OnFailure: f}
}

func testDepsAllSucceed(t *testing.T, b broker.Broker) {
	a, c := EnqueueOne(t, b, T0, NewTask("deps")), EnqueueOne(t, b, T0, NewTask("deps"))
	d := EnqueueOne(t, b, T0, dependent("q", dep(a.ID, 0), dep(c.ID, broker.OnFailureBlock)))
	if d.State != blocked {
		t.Fatalf("a task with running dependencies starts %s", d.State)
	}
	if n := Ready(b, "q"); n != 0 {
		t.Fatalf("Ready = %d with the task blocked", n)
	}
	ls := Lease(t, b, "s1", "deps", 2, T0, TTL)
	Succeed(t, b, "s1", ls[0], at(time.Second))
	RequireState(t, b, d.ID, blocked)
	Succeed(t, b, "s1", ls[1], at(2*time.Second))
	RequireState(t, b, d.ID, pending)
	if l := LeaseOne(t, b, "s1", "q", at(2*time.Second)); l.Task.ID != d.ID {
		t.Fatalf("leased %s, want the released dependent", l.Task.ID)
	}
}

func testDepsOnFailureBlock(t *testing.T, b broker.Broker) {
	a, c := EnqueueOne(t, b, T0, NewTask("deps")), EnqueueOne(t, b, T0, NewTask("deps"))
	d := EnqueueOne(t, b, T0, dependent("q", dep(a.ID, broker.OnFailureBlock), dep(c.ID, 0)))
	ls := Lease(t, b, "s1", "deps", 2, T0, TTL)
	Archive(t, b, "s1", ls[0], "bad", T0)
	got := RequireState(t, b, d.ID, blocked)
	if !strings.Contains(got.LastError, a.ID) || !strings.Contains(got.LastError, "archived") {
		t.Fatalf("blocked for good with last error %q, want it to name the failed dependency", got.LastError)
	}
	Succeed(t, b, "s1", ls[1], T0)
	RequireState(t, b, d.ID, blocked) // the other dependency's success does not release it
	actOK(t, b, broker.ActionRun, at(time.Second), d.ID)
	RequireState(t, b, d.ID, pending)
}

func testDepsCascade(t *testing.T, b broker.Broker) {
	a := EnqueueOne(t, b, T0, NewTask("deps"))
	c := EnqueueOne(t, b, T0, dependent("q", dep(a.ID, broker.OnFailureCascadeCancel)))
	cc := EnqueueOne(t, b, T0, dependent("q", dep(c.ID, broker.OnFailureCascadeCancel)))
	blk := EnqueueOne(t, b, T0, dependent("q", dep(c.ID, broker.OnFailureBlock)))
	Archive(t, b, "s1", LeaseOne(t, b, "s1", "deps", T0), "bad", T0)
	RequireState(t, b, c.ID, canceled)
	RequireState(t, b, cc.ID, canceled) // down the graph
	if got := RequireState(t, b, blk.ID, blocked); !strings.Contains(got.LastError, c.ID) {
		t.Fatalf("a BLOCK dependent of a canceled task: last error %q", got.LastError)
	}
	RequireCounts(t, b, "q", Counts{canceled: 2, blocked: 1})
}

func testDepsContinue(t *testing.T, b broker.Broker) {
	a := EnqueueOne(t, b, T0, NewTask("deps"))
	c := EnqueueOne(t, b, T0, dependent("q", dep(a.ID, broker.OnFailureContinue)))
	Archive(t, b, "s1", LeaseOne(t, b, "s1", "deps", T0), "bad", T0)
	RequireState(t, b, c.ID, pending)
}

func testDepsAlreadyFinished(t *testing.T, b broker.Broker) {
	ok := EnqueueOne(t, b, T0, NewTask("deps"))
	Succeed(t, b, "s1", LeaseOne(t, b, "s1", "deps", T0), T0)
	bad := EnqueueOne(t, b, T0, NewTask("deps"))
	Archive(t, b, "s1", LeaseOne(t, b, "s1", "deps", T0), "x", T0)
	cases := []struct {
		on   broker.Dependency
		want broker.State
	}{
		{dep(ok.ID, 0), pending},
		{dep(bad.ID, broker.OnFailureContinue), pending},
		{dep(bad.ID, broker.OnFailureBlock), blocked},
		{dep(bad.ID, broker.OnFailureCascadeCancel), canceled},
	}
	for _, c := range cases {
		task := EnqueueOne(t, b, at(time.Second), dependent("q", c.on))
		if task.State != c.want {
			t.Fatalf("on a finished dependency (%v): starts %s, want %s", c.on.OnFailure, task.State, c.want)
		}
		RequireState(t, b, task.ID, c.want)
	}
	if n := Ready(b, "q"); n != 2 {
		t.Fatalf("Ready = %d, want the 2 satisfied tasks", n)
	}
}

func testDepsUnknown(t *testing.T, b broker.Broker) {
	res := enqueueResults(t, b, T0, dependent("q", dep(NewID(), 0)), NewTask("q"))
	requireItemErr(t, res, 0, broker.ErrInvalidArgument)
	if res[1].Err != nil {
		t.Fatalf("the item without dependencies failed too: %v", res[1].Err)
	}
	_, err := b.EnqueueTx(t.Context(), broker.EnqueueParams{Now: T0, Tasks: WithStates([]broker.NewTask{NewTask("q"), dependent("q", dep(NewID(), 0))}, T0)})
	requireErrIs(t, "EnqueueTx with an unknown dependency", err, broker.ErrInvalidArgument)
	RequireCounts(t, b, "q", Counts{pending: 1})
}

func testDepsInTx(t *testing.T, b broker.Broker) {
	first := NewTask("q")
	first.ID = NewID()
	second := dependent("q", dep(first.ID, 0))
	tx, err := b.EnqueueTx(t.Context(), broker.EnqueueParams{Now: T0, Tasks: WithStates([]broker.NewTask{first, second}, T0)})
	if err != nil {
		t.Fatal(err)
	}
	if tx[1].State != blocked {
		t.Fatalf("an item depending on an earlier one starts %s", tx[1].State)
	}
	Succeed(t, b, "s1", LeaseOne(t, b, "s1", "q", T0), T0)
	RequireState(t, b, tx[1].ID, pending)
	// A later item cannot be depended on: it does not exist yet.
	later := NewTask("q")
	later.ID = NewID()
	_, err = b.EnqueueTx(t.Context(), broker.EnqueueParams{Now: T0, Tasks: WithStates([]broker.NewTask{dependent("q", dep(later.ID, 0)), later}, T0)})
	requireErrIs(t, "an item depending on a later one", err, broker.ErrInvalidArgument)
}

func testDepsFanOut(t *testing.T, b broker.Broker) {
	root := EnqueueOne(t, b, T0, NewTask("root"))
	const n = 2000
	batch := make([]broker.NewTask, n)
	for i := range batch {
		batch[i] = dependent("fan", dep(root.ID, 0))
	}
	Enqueue(t, b, T0, batch...)
	RequireCounts(t, b, "fan", Counts{blocked: n})
	Succeed(t, b, "s1", LeaseOne(t, b, "s1", "root", T0), T0)
	RequireCounts(t, b, "fan", Counts{pending: n})
	if got := Ready(b, "fan"); got != n {
		t.Fatalf("Ready = %d after the root finished, want %d", got, n)
	}
}

func testDepsLinks(t *testing.T, b broker.Broker) {
	a := EnqueueOne(t, b, T0, NewTask("deps"))
	c := EnqueueOne(t, b, T0, dependent("q", dep(a.ID, broker.OnFailureContinue)))
	got := GetTask(t, b, c.ID)
	if len(got.DependsOn) != 1 || got.DependsOn[0].State != pending || got.DependsOn[0].OnFailure != broker.OnFailureContinue {
		t.Fatalf("DependsOn = %+v, want the dependency with its state", got.DependsOn)
	}
	if ga := GetTask(t, b, a.ID); len(ga.Dependents) != 1 || ga.Dependents[0] != (broker.TaskLink{TaskID: c.ID, State: blocked}) {
		t.Fatalf("Dependents = %+v, want the blocked task", ga.Dependents)
	}
	Succeed(t, b, "s1", LeaseOne(t, b, "s1", "deps", T0), T0)
	if ga := GetTask(t, b, a.ID); len(ga.Dependents) != 1 || ga.Dependents[0].State != pending {
		t.Fatalf("after the dependency completed, Dependents = %+v", ga.Dependents)
	}
}

func testDepsDeleted(t *testing.T, b broker.Broker) {
	a := EnqueueOne(t, b, T0, NewTask("deps"))
	blk := EnqueueOne(t, b, T0, dependent("q", dep(a.ID, 0)))
	cnt := EnqueueOne(t, b, T0, dependent("q", dep(a.ID, broker.OnFailureContinue)))
	actOK(t, b, broker.ActionDelete, T0, a.ID)
	RequireState(t, b, blk.ID, blocked)
	RequireState(t, b, cnt.ID, pending)
}

// testDepsDeletedDependentIDReused: a BLOCKED task deleted while it waits
// takes its dependencies with it. A new task enqueued with its id (a
// producer's id used again) waits for its own dependencies only: the end
// of one the deleted task waited for does not count for it.
func testDepsDeletedDependentIDReused(t *testing.T, e *Env) {
	b := e.B
	a, c := EnqueueOne(t, b, T0, NewTask("deps")), EnqueueOne(t, b, T0, NewTask("deps"))
	old := dependent("q", dep(a.ID, 0))
	old.ID = NewID()
	EnqueueOne(t, b, T0, old)
	actOK(t, b, broker.ActionDelete, T0, old.ID)
	again := dependent("q", dep(c.ID, 0))
	again.ID = old.ID
	EnqueueOne(t, b, T0, again)
	if ga := GetTask(t, b, a.ID); len(ga.Dependents) != 0 {
		t.Fatalf("%s lists dependents %+v; the task given the deleted dependent's id does not depend on it", a.ID, ga.Dependents)
	}
	if gc := GetTask(t, b, c.ID); len(gc.Dependents) != 1 || gc.Dependents[0].TaskID != again.ID {
		t.Fatalf("%s lists dependents %+v, want %s", c.ID, gc.Dependents, again.ID)
	}
	l := LeaseOne(t, b, "s1", "deps", T0)
	if l.Task.ID != a.ID {
		t.Fatalf("leased %s, want %s first", l.Task.ID, a.ID)
	}
	Succeed(t, b, "s1", l, T0)
	if got := RequireState(t, b, again.ID, blocked); len(got.DependsOn) != 1 || got.DependsOn[0].TaskID != c.ID {
		t.Fatalf("the new task's dependencies: %+v, want %s only", got.DependsOn, c.ID)
	}
	if n := Ready(b, "q"); n != 0 {
		t.Fatalf("Ready(q) = %d while the new task waits for %s", n, c.ID)
	}
	b = e.Reopen()
	RequireState(t, b, again.ID, blocked)
	Succeed(t, b, "s1", LeaseOne(t, b, "s1", "deps", T0), T0)
	RequireState(t, b, again.ID, pending)
	RequireCounts(t, b, "q", Counts{pending: 1})
}

func testDepsRestart(t *testing.T, e *Env) {
	a, c := EnqueueOne(t, e.B, T0, NewTask("deps")), EnqueueOne(t, e.B, T0, NewTask("deps"))
	waiting := EnqueueOne(t, e.B, T0, dependent("q", dep(a.ID, 0), dep(c.ID, 0)))
	failed := EnqueueOne(t, e.B, T0, dependent("q", dep(a.ID, 0), dep(c.ID, 0)))
	ls := Lease(t, e.B, "s1", "deps", 1, T0, TTL)
	Succeed(t, e.B, "s1", ls[0], T0) // a done: both now wait for c only
	b := e.Reopen()
	RequireState(t, b, waiting.ID, blocked)
	actOK(t, b, broker.ActionRun, T0, failed.ID) // run it now, dependencies ignored
	Succeed(t, b, "s1", LeaseOne(t, b, "s1", "deps", T0), T0)
	RequireState(t, b, waiting.ID, pending)
	RequireState(t, b, failed.ID, pending)
	b = e.Reopen()
	RequireCounts(t, b, "q", Counts{pending: 2})

	// A failure under ON_FAILURE_BLOCK survives a restart: the other
	// dependency's success does not release the task after it.
	x, y := EnqueueOne(t, b, T0, NewTask("deps2")), EnqueueOne(t, b, T0, NewTask("deps2"))
	stuck := EnqueueOne(t, b, T0, dependent("q2", dep(x.ID, 0), dep(y.ID, 0)))
	Archive(t, b, "s1", LeaseOne(t, b, "s1", "deps2", T0), "bad", T0)
	b = e.Reopen()
	Succeed(t, b, "s1", LeaseOne(t, b, "s1", "deps2", T0), T0)
	RequireState(t, b, stuck.ID, blocked)
}

// testDepsStartedAfterRelease: a dependent's started_at is never before
// its dependency's completed_at. Callers read their clock before the
// engine serializes their calls, so a lease may carry a Now a little
// older than the completion that released the task it leases, and an
// enqueue a Now older than the completion of a dependency it finds done;
// the start recorded must still follow the completion.
func testDepsStartedAfterRelease(t *testing.T, b broker.Broker) {
	a := EnqueueOne(t, b, T0, NewTask("deps"))
	released := EnqueueOne(t, b, T0, dependent("q", dep(a.ID, 0)))
	Succeed(t, b, "s1", LeaseOne(t, b, "s1", "deps", T0), at(2*time.Second))
	done := GetTask(t, b, a.ID).CompletedAt
	late := EnqueueOne(t, b, at(time.Second), dependent("q", dep(a.ID, 0))) // its Now read before the completion
	ls := Lease(t, b, "s2", "q", 2, at(time.Second), TTL)                   // and this one's too
	if len(ls) != 2 {
		t.Fatalf("leased %d tasks, want both dependents", len(ls))
	}
	for _, l := range ls {
		if l.Task.StartedAt.Before(done) {
			t.Fatalf("dependent %s (released %s, enqueued late %s) started at %s, before its dependency completed, %s",
				l.Task.ID, released.ID, late.ID, l.Task.StartedAt, done)
		}
		if got := GetTask(t, b, l.Task.ID); got.StartedAt.Before(done) {
			t.Fatalf("dependent %s: stored started_at %s is before its dependency completed, %s", l.Task.ID, got.StartedAt, done)
		}
	}
}

// testDepsStartedAfterEveryDependency: the dependency whose end releases
// a task may carry an older Now than another dependency that ended
// before it (two sessions' results, their clocks read before the engine
// took them in the other order). The dependent still starts no earlier
// than either ended.
func testDepsStartedAfterEveryDependency(t *testing.T, b broker.Broker) {
	first, second := EnqueueOne(t, b, T0, NewTask("deps")), EnqueueOne(t, b, T0, NewTask("deps"))
	d := EnqueueOne(t, b, T0, dependent("q", dep(first.ID, 0), dep(second.ID, 0)))
	ls := Lease(t, b, "s1", "deps", 2, T0, TTL)
	if len(ls) != 2 {
		t.Fatalf("leased %d dependencies, want 2", len(ls))
	}
	Succeed(t, b, "s1", ls[0], at(3*time.Second)) // ended first, with the later Now
	Succeed(t, b, "s1", ls[1], at(2*time.Second)) // its end releases d
	RequireState(t, b, d.ID, pending)
	latest := GetTask(t, b, ls[0].Task.ID).CompletedAt
	l := LeaseOne(t, b, "s2", "q", at(2*time.Second))
	if l.Task.ID != d.ID {
		t.Fatalf("leased %s, want the dependent %s", l.Task.ID, d.ID)
	}
	if l.Task.StartedAt.Before(latest) {
		t.Fatalf("the dependent started at %s, before its dependency %s completed, %s", l.Task.StartedAt, ls[0].Task.ID, latest)
	}
	if got := GetTask(t, b, d.ID); got.StartedAt.Before(latest) {
		t.Fatalf("the dependent's stored started_at %s is before its dependency completed, %s", got.StartedAt, latest)
	}
}

// testDepsGrouped: a grouped task with dependencies stays BLOCKED, never
// batch-leased, until they succeed, then joins its group; its
// dependencies are checked and their failures applied as for any task.
func testDepsGrouped(t *testing.T, e *Env) {
	b := e.B
	policy(t, b, "q", 2, time.Hour, time.Hour)
	withDeps := func(on ...broker.Dependency) broker.NewTask {
		nt := grouped("q", "g", "t")
		nt.DependsOn = on
		return nt
	}
	a := EnqueueOne(t, b, T0, NewTask("deps"))
	waiting := EnqueueOne(t, b, T0, withDeps(dep(a.ID, 0)))
	if waiting.State != blocked {
		t.Fatalf("a grouped task with a running dependency starts %s, want blocked", waiting.State)
	}
	res := enqueueResults(t, b, T0, withDeps(dep(NewID(), 0)))
	requireItemErr(t, res, 0, broker.ErrInvalidArgument)
	x := EnqueueOne(t, b, T0, NewTask("deps2"))
	doomed := EnqueueOne(t, b, T0, withDeps(dep(x.ID, broker.OnFailureCascadeCancel)))
	other := EnqueueOne(t, b, T0, grouped("q", "g", "t"))
	if n := readyGroups(b, "q", "t"); n != 0 {
		t.Fatalf("ReadyGroups = %d: the blocked members count toward the group", n)
	}
	if gl := leaseGroups(t, b, "q", 5, T0, "t"); len(gl) != 0 {
		t.Fatalf("LeaseGroups = %+v with one member aggregating and the rest blocked", gl)
	}
	Archive(t, b, "s1", LeaseOne(t, b, "s1", "deps2", T0), "bad", T0)
	RequireState(t, b, doomed.ID, canceled)

	b = e.Reopen() // the blocked member and its group survive a restart
	RequireState(t, b, waiting.ID, blocked)
	Succeed(t, b, "s1", LeaseOne(t, b, "s1", "deps", at(time.Second)), at(time.Second))
	RequireState(t, b, waiting.ID, aggregating)
	gl := leaseGroups(t, b, "q", 5, at(2*time.Second), "t")
	if len(gl) != 1 || len(gl[0].Leases) != 2 || gl[0].Leases[0].Task.ID != other.ID || gl[0].Leases[1].Task.ID != waiting.ID {
		t.Fatalf("LeaseGroups = %+v once the dependency completed, want %s and %s in one batch", gl, other.ID, waiting.ID)
	}

	// A dependency already done at enqueue: the task joins its group at once.
	late := EnqueueOne(t, b, at(3*time.Second), withDeps(dep(a.ID, 0)))
	if late.State != aggregating {
		t.Fatalf("a grouped task whose dependency completed starts %s, want aggregating", late.State)
	}
	EnqueueOne(t, b, at(3*time.Second), grouped("q", "g", "t"))
	if n := readyGroups(b, "q", "t"); n != 1 {
		t.Fatalf("ReadyGroups = %d with both members in, want 1", n)
	}
	RequireCounts(t, b, "q", Counts{active: 2, aggregating: 2, canceled: 1})
}

// testDepsDelay: a BLOCKED task with a process time is SCHEDULED until
// then once its dependencies are done (at enqueue or later, across a
// restart), and PENDING when that time has passed by then.
func testDepsDelay(t *testing.T, e *Env) {
	b := e.B
	delayed := func(processAt time.Time, on ...broker.Dependency) broker.NewTask {
		nt := dependent("q", on...)
		nt.ProcessAt = processAt
		return nt
	}
	a := EnqueueOne(t, b, T0, NewTask("deps"))
	d := EnqueueOne(t, b, T0, delayed(at(time.Hour), dep(a.ID, 0)))
	if d.State != blocked || !d.NextProcessAt.Equal(at(time.Hour)) {
		t.Fatalf("a delayed task with a running dependency starts %s due %v, want blocked due %v", d.State, d.NextProcessAt, at(time.Hour))
	}
	soon := EnqueueOne(t, b, T0, delayed(at(time.Minute), dep(a.ID, 0)))

	b = e.Reopen()
	Succeed(t, b, "s1", LeaseOne(t, b, "s1", "deps", at(2*time.Minute)), at(2*time.Minute))
	if got := RequireState(t, b, d.ID, scheduled); !got.NextProcessAt.Equal(at(time.Hour)) {
		t.Fatalf("released, due %v, want its process time %v", got.NextProcessAt, at(time.Hour))
	}
	RequireState(t, b, soon.ID, pending) // its time passed while it was blocked
	late := EnqueueOne(t, b, at(3*time.Minute), delayed(at(2*time.Hour), dep(a.ID, 0)))
	if late.State != scheduled || !late.NextProcessAt.Equal(at(2*time.Hour)) {
		t.Fatalf("a delayed task whose dependency completed starts %s due %v, want scheduled due %v", late.State, late.NextProcessAt, at(2*time.Hour))
	}

	b = e.Reopen()
	if next := promote(t, b, at(59*time.Minute)); !next.Equal(at(time.Hour)) {
		t.Fatalf("PromoteDue next = %v, want the released task's process time %v", next, at(time.Hour))
	}
	if n := Ready(b, "q"); n != 1 {
		t.Fatalf("Ready = %d before the process time, want only the task whose time passed", n)
	}
	promote(t, b, at(time.Hour))
	RequireState(t, b, d.ID, pending)
	RequireState(t, b, late.ID, scheduled)
	RequireCounts(t, b, "q", Counts{pending: 2, scheduled: 1})
}
