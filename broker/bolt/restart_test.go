package bolt_test

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/conveyor-dev/conveyor/broker"
	"github.com/conveyor-dev/conveyor/broker/bolt"
	bt "github.com/conveyor-dev/conveyor/broker/brokertest"
	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
)

const (
	stateScheduled = conveyorv1.TaskState_TASK_STATE_SCHEDULED
	statePending   = conveyorv1.TaskState_TASK_STATE_PENDING
	stateActive    = conveyorv1.TaskState_TASK_STATE_ACTIVE
	stateRetry     = conveyorv1.TaskState_TASK_STATE_RETRY
	stateCompleted = conveyorv1.TaskState_TASK_STATE_COMPLETED
	stateArchived  = conveyorv1.TaskState_TASK_STATE_ARCHIVED
	stateAggr      = conveyorv1.TaskState_TASK_STATE_AGGREGATING
	stateBlocked   = conveyorv1.TaskState_TASK_STATE_BLOCKED

	outcomeSuccess   = conveyorv1.TaskOutcome_TASK_OUTCOME_SUCCESS
	outcomeRetry     = conveyorv1.TaskOutcome_TASK_OUTCOME_RETRY
	outcomeSkipRetry = conveyorv1.TaskOutcome_TASK_OUTCOME_SKIP_RETRY
)

func fixedRetry(d time.Duration) *conveyorv1.TaskOptions {
	return &conveyorv1.TaskOptions{RetryPolicy: &conveyorv1.RetryPolicy{
		Strategy: conveyorv1.RetryStrategy_RETRY_STRATEGY_FIXED, Base: durationpb.New(d)}}
}

// restartFixture is a file holding a task in every state, and what the
// test expects of each after a restart.
type restartFixture struct {
	pending, urgent, sched, retrying, running, done, doneNoRetention, dead, grouped, blocked, expiring, paused string
}

// populate fills e with one task per state (times from bt.T0), in queues
// "q" and "paused" (paused), and an empty paused-then-resumed queue "idle".
func populate(t *testing.T, e broker.Broker) restartFixture {
	t.Helper()
	var f restartFixture
	T0 := bt.T0

	// Tasks that end up ACTIVE, RETRY, COMPLETED or ARCHIVED, leased first.
	running := bt.NewTask("q")
	running.MaxRetry = 5
	f.running = bt.EnqueueOne(t, e, T0, running).ID
	// Two lapsed leases: retried 2, then leased again and left running.
	for i := range 2 {
		now := T0.Add(time.Duration(i) * 2 * bt.TTL)
		bt.LeaseOne(t, e, "s-old", "q", now)
		if lapsed, _, err := e.ReapLeases(t.Context(), now.Add(bt.TTL)); err != nil || len(lapsed) != 1 {
			t.Fatalf("ReapLeases = %v, %v", lapsed, err)
		}
	}
	l := bt.LeaseOne(t, e, "s1", "q", T0.Add(5*time.Minute))
	if l.Task.ID != f.running || l.Task.Retried != 2 {
		t.Fatalf("leased %s retried %d, want %s retried 2", l.Task.ID, l.Task.Retried, f.running)
	}
	if err := e.Progress(t.Context(), broker.ProgressParams{SessionID: "s1", Lease: bt.Ref(l), Percent: 30, Message: "a third"}); err != nil {
		t.Fatal(err)
	}

	retrying := bt.NewTask("q")
	retrying.Options = fixedRetry(30 * time.Minute)
	f.retrying = bt.EnqueueOne(t, e, T0, retrying).ID
	bt.Complete(t, e, "s1", bt.LeaseOne(t, e, "s1", "q", T0), outcomeRetry, "flaky", T0.Add(time.Second))

	f.done = bt.EnqueueOne(t, e, T0, bt.NewTask("q")).ID
	ld := bt.LeaseOne(t, e, "s1", "q", T0)
	if _, err := e.Complete(t.Context(), broker.CompleteParams{SessionID: "s1", Lease: bt.Ref(ld), Outcome: outcomeSuccess,
		Result: []byte("the result"), Now: T0.Add(2 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	zero := time.Duration(0)
	noRetention := bt.NewTask("q")
	noRetention.Retention = &zero
	f.doneNoRetention = bt.EnqueueOne(t, e, T0, noRetention).ID
	bt.Complete(t, e, "s1", bt.LeaseOne(t, e, "s1", "q", T0), outcomeSuccess, "", T0.Add(3*time.Second))
	// One more completed with no retention, purged before the restart, so
	// the persisted counts have seen a decrement.
	purged := bt.EnqueueOne(t, e, T0, noRetention)
	bt.Complete(t, e, "s1", bt.LeaseOne(t, e, "s1", "q", T0), outcomeSuccess, "", T0)
	if _, err := e.Purge(t.Context(), T0); err != nil {
		t.Fatal(err)
	}
	if _, err := e.GetTask(t.Context(), purged.ID); !errors.Is(err, broker.ErrNotFound) {
		t.Fatalf("GetTask of the purged task: %v", err)
	}

	f.dead = bt.EnqueueOne(t, e, T0, bt.NewTask("q")).ID
	bt.Complete(t, e, "s1", bt.LeaseOne(t, e, "s1", "q", T0), outcomeSkipRetry, "bad input", T0.Add(time.Second))

	// Waiting tasks.
	p := bt.NewTask("q")
	p.UniqueKey = "uk-pending"
	p.Metadata = map[string]string{"k": "v"}
	f.pending = bt.EnqueueOne(t, e, T0, p).ID
	urgent := bt.NewTask("q")
	urgent.Priority = 9
	f.urgent = bt.EnqueueOne(t, e, T0, urgent).ID
	s := bt.NewTask("q")
	s.ProcessAt = T0.Add(10 * time.Minute)
	s.UniqueKey = "uk-scheduled"
	f.sched = bt.EnqueueOne(t, e, T0, s).ID
	g := bt.NewTask("q")
	g.Group = "g"
	f.grouped = bt.EnqueueOne(t, e, T0, g).ID
	b := bt.NewTask("q")
	b.DependsOn = []broker.Dependency{{TaskID: f.pending}}
	f.blocked = bt.EnqueueOne(t, e, T0, b).ID
	x := bt.NewTask("q")
	x.ExpiresAt = T0.Add(7 * time.Minute)
	f.expiring = bt.EnqueueOne(t, e, T0, x).ID

	if _, err := e.SetQueuePaused(t.Context(), "paused", true); err != nil {
		t.Fatal(err)
	}
	f.paused = bt.EnqueueOne(t, e, T0, bt.NewTask("paused")).ID
	if _, err := e.SetQueuePaused(t.Context(), "idle", true); err != nil {
		t.Fatal(err)
	}
	if _, err := e.SetQueuePaused(t.Context(), "idle", false); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f restartFixture) ids() []string {
	return []string{f.pending, f.urgent, f.sched, f.retrying, f.running, f.done, f.doneNoRetention,
		f.dead, f.grouped, f.blocked, f.expiring, f.paused}
}

func TestRestartKeepsEverything(t *testing.T) {
	path := filepath.Join(t.TempDir(), "conveyor.db")
	e := openEngine(t, bolt.Config{Path: path})
	f := populate(t, e)
	bt.RequireCounts(t, e, "q", bt.Counts{
		statePending: 3, stateScheduled: 1, stateActive: 1, stateRetry: 1,
		stateCompleted: 2, stateArchived: 1, stateAggr: 1, stateBlocked: 1,
	})

	before := map[string]*broker.Task{}
	for _, id := range f.ids() {
		before[id] = bt.GetTask(t, e, id)
	}
	queuesBefore, err := e.Queues(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}

	e = openEngine(t, bolt.Config{Path: path})
	for _, id := range f.ids() {
		want := before[id]
		if id == f.running {
			// The session that held it is gone: pending again, and that
			// is not the task's fault.
			w := *want
			w.State = statePending
			want = &w
		}
		bt.RequireSameTask(t, "task "+id+" after restart", bt.GetTask(t, e, id), want)
	}
	if got := bt.GetTask(t, e, f.running); got.Retried != 2 {
		t.Fatalf("formerly active task has retried %d, want 2", got.Retried)
	}

	queuesAfter, err := e.Queues(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(queuesAfter) != len(queuesBefore) {
		t.Fatalf("queues after restart %+v, before %+v", queuesAfter, queuesBefore)
	}
	for i, qa := range queuesAfter {
		qb := queuesBefore[i]
		wantCounts := qb.Counts
		wantCounts[statePending] += wantCounts[stateActive]
		wantCounts[stateActive] = 0
		if qa.Name != qb.Name || qa.Paused != qb.Paused || qa.Counts != wantCounts {
			t.Fatalf("queue after restart %+v, want %+v with ACTIVE counted as PENDING", qa, qb)
		}
		if qa.Processed != 0 || qa.Failed != 0 {
			t.Fatalf("queue %q: Processed/Failed %d/%d after restart, want 0 (they count since open)", qa.Name, qa.Processed, qa.Failed)
		}
	}
	if len(queuesAfter) != 3 || queuesAfter[0].Name != "idle" || !queuesAfter[1].Paused {
		t.Fatalf("queues after restart = %+v, want idle, paused (paused) and q", queuesAfter)
	}

	// Paused survives: nothing ready in "paused".
	if n := bt.Ready(e, "paused"); n != 0 {
		t.Fatalf("Ready(paused) = %d after restart", n)
	}
	if ls := bt.Lease(t, e, "s2", "paused", 10, bt.T0, bt.TTL); len(ls) != 0 {
		t.Fatalf("leased from a queue paused before the restart")
	}

	// Unique claims survive.
	for _, uk := range []string{"uk-pending", "uk-scheduled"} {
		nt := bt.NewTask("q")
		nt.UniqueKey = uk
		res, err := e.Enqueue(t.Context(), broker.EnqueueParams{Tasks: []broker.NewTask{nt}, Now: bt.T0.Add(time.Minute)})
		if err != nil || !errors.Is(res[0].Err, broker.ErrAlreadyExists) {
			t.Fatalf("unique key %q after restart: %v %v, want ErrAlreadyExists", uk, res, err)
		}
	}
	// So do ids of terminal tasks.
	dup := bt.NewTask("q")
	dup.ID = f.done
	if res, err := e.Enqueue(t.Context(), broker.EnqueueParams{Tasks: []broker.NewTask{dup}, Now: bt.T0}); err != nil || !errors.Is(res[0].Err, broker.ErrAlreadyExists) {
		t.Fatalf("re-enqueue of a completed id after restart: %v %v", res, err)
	}

	// Timers are rebuilt: the expiry (T0+7m) is next, then the schedule.
	now := bt.T0.Add(6 * time.Minute)
	next, err := e.PromoteDue(t.Context(), now)
	if err != nil {
		t.Fatal(err)
	}
	if !next.Equal(bt.T0.Add(7 * time.Minute)) {
		t.Fatalf("PromoteDue next = %v, want the expiry at T0+7m", next)
	}
	if _, err := e.PromoteDue(t.Context(), bt.T0.Add(10*time.Minute)); err != nil {
		t.Fatal(err)
	}
	bt.RequireState(t, e, f.expiring, stateArchived)
	bt.RequireState(t, e, f.sched, statePending)

	// The formerly active task is leasable, with its retries intact,
	// behind the priority-9 task.
	ls := bt.Lease(t, e, "s2", "q", 10, bt.T0.Add(10*time.Minute), bt.TTL)
	if len(ls) != 4 || ls[0].Task.ID != f.urgent {
		t.Fatalf("leased %d tasks after restart (first %v), want 4 with the priority-9 task first", len(ls), ls)
	}
	found := false
	for _, l := range ls {
		if l.Task.ID == f.running {
			found = true
			if l.Task.Retried != 2 {
				t.Fatalf("formerly active task leased with retried %d, want 2", l.Task.Retried)
			}
		}
		if l.Token == 0 {
			t.Fatalf("zero lease token after restart")
		}
	}
	if !found {
		t.Fatalf("the formerly active task was not leased after restart")
	}

	// The retry is still due at its time.
	retrying := bt.RequireState(t, e, f.retrying, stateRetry)
	if _, err := e.PromoteDue(t.Context(), retrying.NextProcessAt); err != nil {
		t.Fatal(err)
	}
	bt.RequireState(t, e, f.retrying, statePending)

	// The purge index survives: the zero-retention task goes first, the
	// default-retention one a day later.
	if _, err := e.Purge(t.Context(), bt.T0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.GetTask(t.Context(), f.doneNoRetention); !errors.Is(err, broker.ErrNotFound) {
		t.Fatalf("zero-retention task after Purge: %v", err)
	}
	bt.RequireState(t, e, f.done, stateCompleted)
	if _, err := e.Purge(t.Context(), bt.T0.Add(25*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.GetTask(t.Context(), f.done); !errors.Is(err, broker.ErrNotFound) {
		t.Fatalf("completed task after Purge past its retention: %v", err)
	}
	bt.RequireCounts(t, e, "q", bt.Counts{
		statePending: 1, stateActive: 4, stateArchived: 2, stateAggr: 1, stateBlocked: 1,
	})

	// And the counts it persisted are right on the next restart too.
	queuesBefore, err = e.Queues(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e = openEngine(t, bolt.Config{Path: path})
	bt.RequireCounts(t, e, "q", bt.Counts{
		statePending: 5, stateArchived: 2, stateAggr: 1, stateBlocked: 1,
	})
	if qs, err := e.Queues(t.Context()); err != nil || len(qs) != len(queuesBefore) {
		t.Fatalf("queues after the second restart: %v, %v", qs, err)
	}
}

func TestRestartFIFOByID(t *testing.T) {
	path := filepath.Join(t.TempDir(), "conveyor.db")
	e := openEngine(t, bolt.Config{Path: path})
	var want []string
	for i := range 5 {
		want = append(want, bt.EnqueueOne(t, e, bt.T0.Add(time.Duration(i)*time.Millisecond), bt.NewTask("q")).ID)
	}
	// Released tasks go to the back of the line while the engine runs...
	l := bt.LeaseOne(t, e, "s1", "q", bt.T0)
	if err := e.Release(t.Context(), broker.ReleaseParams{SessionID: "s1", Leases: []broker.LeaseRef{bt.Ref(l)}, Now: bt.T0}); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	// ...but after a restart the order is by id, which is enqueue order.
	e = openEngine(t, bolt.Config{Path: path})
	ls := bt.Lease(t, e, "s1", "q", 10, bt.T0, bt.TTL)
	var got []string
	for _, l := range ls {
		got = append(got, l.Task.ID)
	}
	if len(got) != len(want) {
		t.Fatalf("leased %d, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("lease order after restart %v, want %v", got, want)
		}
	}
}

func TestOpenErrors(t *testing.T) {
	if _, err := bolt.Open(bolt.Config{}); err == nil {
		t.Fatalf("Open with no path succeeded")
	}
	// A directory where the file should be.
	dir := t.TempDir()
	if _, err := bolt.Open(bolt.Config{Path: dir}); err == nil {
		t.Fatalf("Open of a directory succeeded")
	}
}
