package brokertest

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
)

func operateCases() []testCase {
	return []testCase{
		{name: "CancelWaiting", fn: testCancelWaiting},
		{name: "CancelActive", fn: testCancelActive},
		{name: "CancelActiveSurvivesRestart", env: testCancelActiveRestart},
		{name: "CancelActiveRestartResolvesDependents", env: testCancelActiveRestartDependents},
		{name: "RunCanceledThenRestartWhileActive", env: testRunCanceledRestart},
		{name: "Run", fn: testRun},
		{name: "RunUniqueKeyTaken", fn: testRunUniqueTaken},
		{name: "RunUniqueClaimLapsed", fn: testRunUniqueClaimLapsed},
		{name: "Archive", fn: testArchive},
		{name: "Delete", fn: testDelete},
		{name: "NotApplicable", fn: testActNotApplicable},
		{name: "Durable", env: testActDurable},
		{name: "ConcurrentOnFinished", env: testActConcurrentOnFinished},
		{name: "ConcurrentWithPurge", env: testActConcurrentWithPurge},
		{name: "RepeatedID", fn: testActRepeatedID},
		{name: "FromState", fn: testActFromState},
	}
}

// act applies action to ids and returns the per-id results.
func act(tb testing.TB, b broker.Broker, a broker.Action, now time.Time, ids ...string) []broker.ActResult {
	tb.Helper()
	res, err := b.Act(tb.Context(), broker.ActParams{Action: a, IDs: ids, Now: now})
	if err != nil {
		tb.Fatalf("Act %s: %v", a, err)
	}
	if len(res) != len(ids) {
		tb.Fatalf("Act %s: %d results for %d ids", a, len(res), len(ids))
	}
	return res
}

// actOK applies action to ids and fails unless each one succeeded.
func actOK(tb testing.TB, b broker.Broker, a broker.Action, now time.Time, ids ...string) {
	tb.Helper()
	for i, r := range act(tb, b, a, now, ids...) {
		if r.Err != nil {
			tb.Fatalf("Act %s on %s: %v", a, ids[i], r.Err)
		}
	}
}

// waitingTasks enqueues one task in each waiting state in queue q, each
// with its own unique key, and returns their ids by state.
func waitingTasks(t *testing.T, b broker.Broker, q string) map[broker.State]string {
	t.Helper()
	ids := map[broker.State]string{}
	p := NewTask(q)
	p.UniqueKey = q + "-pending"
	ids[pending] = EnqueueOne(t, b, T0, p).ID
	s := NewTask(q)
	s.ProcessAt, s.UniqueKey = at(time.Hour), q+"-scheduled"
	ids[scheduled] = EnqueueOne(t, b, T0, s).ID
	g := NewTask(q)
	g.Group = "g"
	ids[aggregating] = EnqueueOne(t, b, T0, g).ID
	bl := NewTask(q)
	bl.DependsOn = []broker.Dependency{{TaskID: ids[scheduled]}}
	ids[blocked] = EnqueueOne(t, b, T0, bl).ID
	r := NewTask(q)
	r.UniqueKey = q + "-retry"
	rt := EnqueueOne(t, b, T0, r)
	// Lease the retry task: it is the newest pending one, behind the first.
	for _, l := range Lease(t, b, "s0", q, 2, T0, TTL) {
		if l.Task.ID == rt.ID {
			Fail(t, b, "s0", l, "boom", T0, at(time.Hour))
		} else {
			Decide(t, b, broker.Released("s0", Ref(l), T0))
		}
	}
	ids[retry] = rt.ID
	for s, id := range ids {
		RequireState(t, b, id, s)
	}
	return ids
}

func testCancelWaiting(t *testing.T, b broker.Broker) {
	ids := waitingTasks(t, b, "q")
	for s, id := range ids {
		if r := act(t, b, broker.ActionCancel, at(time.Second), id)[0]; r.Err != nil || r.Running != nil {
			t.Fatalf("cancel a %s task: %+v", s, r)
		}
		got := RequireState(t, b, id, canceled)
		if !got.CompletedAt.Equal(at(time.Second)) {
			t.Fatalf("canceled %s task CompletedAt %v", s, got.CompletedAt)
		}
	}
	RequireCounts(t, b, "q", Counts{canceled: 5})
	if ls := Lease(t, b, "s1", "q", 10, at(2*time.Hour), TTL); len(ls) != 0 {
		t.Fatalf("leased %d canceled tasks", len(ls))
	}
	// The unique keys are free again.
	for _, uk := range []string{"q-pending", "q-scheduled", "q-retry"} {
		nt := NewTask("q")
		nt.UniqueKey = uk
		EnqueueOne(t, b, at(3*time.Second), nt)
	}
}

func testCancelActive(t *testing.T, b broker.Broker) {
	ends := []struct {
		name string
		end  func(l broker.Lease) // how the attempt ends
		want broker.State
	}{
		{"success", func(l broker.Lease) { Succeed(t, b, "s1", l, at(time.Second)) }, completed},
		{"failure", func(l broker.Lease) { Fail(t, b, "s1", l, "boom", at(time.Second), at(time.Minute)) }, archived},
		{"permanent failure", func(l broker.Lease) { Archive(t, b, "s1", l, "bad", at(time.Second)) }, archived},
		{"released", func(l broker.Lease) { Decide(t, b, broker.Released("s1", Ref(l), at(time.Second))) }, canceled},
		{"stream closed", func(l broker.Lease) {
			if err := b.Release(t.Context(), broker.ReleaseParams{SessionID: "s1", Leases: []broker.LeaseRef{Ref(l)}, Now: at(time.Second)}); err != nil {
				t.Fatal(err)
			}
		}, canceled},
		{"lease lapsed", func(broker.Lease) { Reap(t, b, at(TTL)) }, canceled},
	}
	for _, c := range ends {
		task := EnqueueOne(t, b, T0, NewTask(c.name))
		l := LeaseOne(t, b, "s1", c.name, T0)
		r := act(t, b, broker.ActionCancel, T0, task.ID)[0]
		if r.Err != nil || r.Running == nil || r.Running.SessionID != "s1" || r.Running.Lease != Ref(l) {
			t.Fatalf("%s: cancel of an ACTIVE task = %+v, want the running lease", c.name, r)
		}
		RequireState(t, b, task.ID, active)
		c.end(l)
		got := RequireState(t, b, task.ID, c.want)
		if c.want == archived && !strings.HasPrefix(got.LastError, broker.CanceledMessage) {
			t.Fatalf("%s: last error %q, want it to say the task was canceled", c.name, got.LastError)
		}
		if ls := Lease(t, b, "s2", c.name, 10, at(time.Hour), TTL); len(ls) != 0 {
			t.Fatalf("%s: a canceled task was redelivered", c.name)
		}
	}
}

func testCancelActiveRestart(t *testing.T, e *Env) {
	task := EnqueueOne(t, e.B, T0, NewTask("q"))
	LeaseOne(t, e.B, "s1", "q", T0)
	actOK(t, e.B, broker.ActionCancel, T0, task.ID)
	b := e.Reopen()
	RequireState(t, b, task.ID, canceled)
	RequireCounts(t, b, "q", Counts{canceled: 1})
	if ls := Lease(t, b, "s2", "q", 10, at(time.Hour), TTL); len(ls) != 0 {
		t.Fatal("a task canceled while it ran was redelivered after a restart")
	}
}

// testCancelActiveRestartDependents: a task canceled while it ran and
// found running by a restart ends canceled like any other, and its
// dependents are told, each by its on_failure.
func testCancelActiveRestartDependents(t *testing.T, e *Env) {
	task := EnqueueOne(t, e.B, T0, NewTask("q"))
	cont := EnqueueOne(t, e.B, T0, dependent("deps", dep(task.ID, broker.OnFailureContinue)))
	cascade := EnqueueOne(t, e.B, T0, dependent("deps", dep(task.ID, broker.OnFailureCascadeCancel)))
	block := EnqueueOne(t, e.B, T0, dependent("deps", dep(task.ID, broker.OnFailureBlock)))
	LeaseOne(t, e.B, "s1", "q", T0)
	actOK(t, e.B, broker.ActionCancel, T0, task.ID)
	for range 2 { // the second restart finds what the first left
		b := e.Reopen()
		RequireState(t, b, task.ID, canceled)
		RequireState(t, b, cont.ID, pending)
		RequireState(t, b, cascade.ID, canceled)
		if got := RequireState(t, b, block.ID, blocked); !strings.Contains(got.LastError, task.ID) {
			t.Fatalf("a BLOCK dependent of a task canceled by the restart: last error %q, want it to name the dependency", got.LastError)
		}
		RequireCounts(t, b, "q", Counts{canceled: 1})
		RequireCounts(t, b, "deps", Counts{pending: 1, canceled: 1, blocked: 1})
	}
	if l := LeaseOne(t, e.B, "s2", "deps", at(time.Minute)); l.Task.ID != cont.ID {
		t.Fatalf("leased %s, want the CONTINUE dependent %s", l.Task.ID, cont.ID)
	}
}

// testRunCanceledRestart: a task canceled while it ran and then run again
// by an operator is a task like any other: a restart while it runs again
// makes it pending, not canceled.
func testRunCanceledRestart(t *testing.T, e *Env) {
	task := EnqueueOne(t, e.B, T0, NewTask("q"))
	l := LeaseOne(t, e.B, "s1", "q", T0)
	actOK(t, e.B, broker.ActionCancel, T0, task.ID)
	Decide(t, e.B, broker.Released("s1", Ref(l), T0))
	RequireState(t, e.B, task.ID, canceled)
	actOK(t, e.B, broker.ActionRun, at(time.Second), task.ID)
	if l := LeaseOne(t, e.B, "s2", "q", at(2*time.Second)); l.Task.ID != task.ID {
		t.Fatalf("leased %s, want the task run again", l.Task.ID)
	}
	b := e.Reopen()
	RequireState(t, b, task.ID, pending)
	RequireCounts(t, b, "q", Counts{pending: 1})
	if l := LeaseOne(t, b, "s3", "q", at(time.Minute)); l.Task.ID != task.ID {
		t.Fatalf("after the restart leased %s, want the task run again", l.Task.ID)
	}
}

func testRun(t *testing.T, b broker.Broker) {
	ids := waitingTasks(t, b, "q")
	actOK(t, b, broker.ActionRun, at(time.Second), ids[scheduled], ids[retry], ids[blocked])
	for _, s := range []broker.State{scheduled, retry, blocked} {
		got := RequireState(t, b, ids[s], pending)
		if s == retry && got.Retried != 1 {
			t.Fatalf("a retry task run now has retried %d, want 1 kept", got.Retried)
		}
	}
	// Archived and canceled tasks come back, their retries kept.
	dead := EnqueueOne(t, b, T0, NewTask("dead"))
	l := LeaseOne(t, b, "s1", "dead", T0)
	Fail(t, b, "s1", l, "x", T0, T0)
	Archive(t, b, "s1", LeaseOne(t, b, "s1", "dead", T0), "bad", at(time.Second))
	gone := EnqueueOne(t, b, T0, NewTask("dead"))
	actOK(t, b, broker.ActionCancel, T0, gone.ID)
	RequireCounts(t, b, "dead", Counts{archived: 1, canceled: 1})
	actOK(t, b, broker.ActionRun, at(2*time.Second), dead.ID, gone.ID)
	if got := RequireState(t, b, dead.ID, pending); got.Retried != 1 || !got.CompletedAt.IsZero() {
		t.Fatalf("an archived task run again: retried %d completed %v", got.Retried, got.CompletedAt)
	}
	RequireState(t, b, gone.ID, pending)
	RequireCounts(t, b, "dead", Counts{pending: 2})
	if ls := Lease(t, b, "s1", "dead", 10, at(2*time.Second), TTL); len(ls) != 2 {
		t.Fatalf("leased %d of the 2 tasks run again", len(ls))
	}
}

func testRunUniqueTaken(t *testing.T, b broker.Broker) {
	nt := NewTask("q")
	nt.UniqueKey = "k"
	old := EnqueueOne(t, b, T0, nt)
	Archive(t, b, "s1", LeaseOne(t, b, "s1", "q", T0), "bad", T0)
	EnqueueOne(t, b, at(time.Second), nt) // takes the key
	r := act(t, b, broker.ActionRun, at(2*time.Second), old.ID)[0]
	requireErrIs(t, "run a task whose unique key is taken", r.Err, broker.ErrAlreadyExists)
	RequireState(t, b, old.ID, archived)
}

// testRunUniqueClaimLapsed: a task that took the key with a unique_until
// holds it no longer once that time has passed, so a task run again takes
// the key back, and a third task is refused it.
func testRunUniqueClaimLapsed(t *testing.T, b broker.Broker) {
	nt := NewTask("q")
	nt.UniqueKey = "k"
	old := EnqueueOne(t, b, T0, nt)
	Archive(t, b, "s1", LeaseOne(t, b, "s1", "q", T0), "bad", T0)
	brief := NewTask("q")
	brief.UniqueKey, brief.UniqueUntil = "k", at(2*time.Second)
	EnqueueOne(t, b, at(time.Second), brief)
	actOK(t, b, broker.ActionRun, at(3*time.Second), old.ID)
	RequireState(t, b, old.ID, pending)
	third := NewTask("q")
	third.UniqueKey = "k"
	res := enqueueResults(t, b, at(4*time.Second), third)
	requireErrIs(t, "enqueue a key the revived task holds", res[0].Err, broker.ErrAlreadyExists)
}

func testArchive(t *testing.T, b broker.Broker) {
	ids := waitingTasks(t, b, "q")
	for s, id := range ids {
		actOK(t, b, broker.ActionArchive, at(time.Second), id)
		if got := RequireState(t, b, id, archived); got.LastError != broker.ArchivedByOperator {
			t.Fatalf("archived %s task: last error %q", s, got.LastError)
		}
	}
	RequireCounts(t, b, "q", Counts{archived: 5})
}

func testDelete(t *testing.T, b broker.Broker) {
	ids := waitingTasks(t, b, "q")
	done := EnqueueOne(t, b, T0, NewTask("q"))
	Succeed(t, b, "s1", LeaseOne(t, b, "s1", "q", T0), T0)
	all := []string{done.ID}
	for _, id := range ids {
		all = append(all, id)
	}
	actOK(t, b, broker.ActionDelete, at(time.Second), all...)
	for _, id := range all {
		_, err := b.GetTask(t.Context(), id)
		requireErrIs(t, "GetTask of a deleted task", err, broker.ErrNotFound)
	}
	RequireCounts(t, b, "q", Counts{})
	// Its id and unique key are free again.
	again := NewTask("q")
	again.ID, again.UniqueKey = ids[pending], "q-pending"
	EnqueueOne(t, b, at(2*time.Second), again)
}

func testActNotApplicable(t *testing.T, b broker.Broker) {
	ids := waitingTasks(t, b, "q")
	running := EnqueueOne(t, b, T0, NewTask("r"))
	LeaseOne(t, b, "s1", "r", T0)
	done := EnqueueOne(t, b, T0, NewTask("d"))
	Succeed(t, b, "s1", LeaseOne(t, b, "s1", "d", T0), T0)
	for _, c := range []struct {
		a  broker.Action
		id string
	}{
		{broker.ActionRun, ids[pending]}, {broker.ActionRun, ids[aggregating]}, {broker.ActionRun, running.ID},
		{broker.ActionRun, done.ID}, {broker.ActionArchive, running.ID}, {broker.ActionArchive, done.ID},
		{broker.ActionDelete, running.ID}, {broker.ActionCancel, done.ID},
	} {
		r := act(t, b, c.a, at(time.Second), c.id)[0]
		requireErrIs(t, c.a.String()+" where it does not apply", r.Err, broker.ErrInvalidState)
	}
	for _, id := range []string{NewID(), "not-a-ulid"} {
		requireErrIs(t, "an action on an unknown task", act(t, b, broker.ActionCancel, T0, id)[0].Err, broker.ErrNotFound)
	}
	RequireState(t, b, running.ID, active)
	RequireState(t, b, done.ID, completed)
}

func testActDurable(t *testing.T, e *Env) {
	ids := waitingTasks(t, e.B, "q")
	actOK(t, e.B, broker.ActionCancel, at(time.Second), ids[pending])
	actOK(t, e.B, broker.ActionArchive, at(time.Second), ids[scheduled])
	actOK(t, e.B, broker.ActionDelete, at(time.Second), ids[aggregating])
	actOK(t, e.B, broker.ActionRun, at(time.Second), ids[retry])
	b := e.Reopen()
	RequireState(t, b, ids[pending], canceled)
	RequireState(t, b, ids[scheduled], archived)
	RequireState(t, b, ids[retry], pending)
	_, err := b.GetTask(t.Context(), ids[aggregating])
	requireErrIs(t, "GetTask of a deleted task after a restart", err, broker.ErrNotFound)
	RequireCounts(t, b, "q", Counts{pending: 1, canceled: 1, archived: 1, blocked: 1})
}

// testActFromState: an action told the state its caller found the tasks
// in (a bulk action's listing) leaves alone, as ErrInvalidState, a task
// that has moved on since: one a worker took, one that finished.
func testActFromState(t *testing.T, b broker.Broker) {
	ts := Enqueue(t, b, T0, NewTask("q"), NewTask("q"), NewTask("q"))
	taken := LeaseOne(t, b, "s1", "q", T0) // ts[0], ACTIVE now
	done := LeaseOne(t, b, "s1", "q", T0)  // ts[1]
	Succeed(t, b, "s1", done, T0)          // COMPLETED now
	res, err := b.Act(t.Context(), broker.ActParams{Action: broker.ActionCancel, IDs: []string{ts[0].ID, ts[1].ID, ts[2].ID}, Now: T0, From: pending})
	if err != nil {
		t.Fatal(err)
	}
	for i, wantErr := range []bool{true, true, false} {
		if got := res[i].Err != nil; got != wantErr || wantErr && !errors.Is(res[i].Err, broker.ErrInvalidState) {
			t.Fatalf("cancel from PENDING of task %d: %v; want refused with ErrInvalidState: %v", i, res[i].Err, wantErr)
		}
	}
	if res[0].Running != nil {
		t.Fatalf("the running task was marked for cancel: %+v", res[0])
	}
	RequireState(t, b, ts[0].ID, active)
	RequireState(t, b, ts[1].ID, completed)
	RequireState(t, b, ts[2].ID, canceled)
	Succeed(t, b, "s1", taken, T0) // its lease is intact: its Result lands
	RequireState(t, b, ts[0].ID, completed)
}
