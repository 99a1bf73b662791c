package brokertest

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
)

// actRacePairs is how many finished tasks each concurrency case races
// actions on: a pair of calls per task, all released together, so that
// calls overlap in every order.
const actRacePairs = 48

// finishedTasks enqueues n tasks in queue q and ends each one in state
// want (COMPLETED or ARCHIVED), returning their ids.
func finishedTasks(t *testing.T, b broker.Broker, q string, n int, want broker.State) []string {
	t.Helper()
	tasks := make([]broker.NewTask, n)
	for i := range tasks {
		tasks[i] = NewTask(q)
	}
	ids := make([]string, n)
	for i, task := range Enqueue(t, b, T0, tasks...) {
		ids[i] = task.ID
	}
	for _, l := range Lease(t, b, "s", q, n, T0, TTL) {
		if want == completed {
			Succeed(t, b, "s", l, T0)
		} else {
			Archive(t, b, "s", l, "dead", T0)
		}
	}
	RequireCounts(t, b, q, Counts{want: int64(n)})
	return ids
}

// raceActs runs, for each id, the actions in acts at once (one call each),
// all calls released together, and returns each call's result by id.
func raceActs(t *testing.T, b broker.Broker, ids []string, acts ...broker.Action) [][]error {
	t.Helper()
	res := make([][]error, len(ids))
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, id := range ids {
		res[i] = make([]error, len(acts))
		for j, a := range acts {
			wg.Go(func() {
				<-start
				r, err := b.Act(t.Context(), broker.ActParams{Action: a, IDs: []string{id}, Now: at(time.Second)})
				if err != nil {
					t.Errorf("Act %s: %v", a, err)
					return
				}
				res[i][j] = r[0].Err
			})
		}
	}
	close(start)
	wg.Wait()
	return res
}

// requireOneApplied checks that exactly one of two concurrent actions on
// task applied, and that the other failed with loser.
func requireOneApplied(t *testing.T, task, action string, errs []error, loser error) {
	t.Helper()
	ok := 0
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case !errors.Is(err, loser):
			t.Errorf("task %s: a %s beside another: %v, want nil or %v", task, action, err, loser)
		}
	}
	if ok != 1 {
		t.Errorf("task %s: %d of two concurrent %ss applied, want 1", task, ok, action)
	}
}

// testActConcurrentOnFinished: concurrent actions on one finished task are
// applied one after the other, each on what the one before left: a second
// delete finds nothing, a run after a delete finds nothing, a second run
// finds the task pending. Counts never drift, every task left is whole
// (it leases), and all of it survives a restart.
func testActConcurrentOnFinished(t *testing.T, e *Env) {
	b := e.B
	deleted := finishedTasks(t, b, "del", actRacePairs, completed)
	for i, errs := range raceActs(t, b, deleted, broker.ActionDelete, broker.ActionDelete) {
		requireOneApplied(t, deleted[i], "delete", errs, broker.ErrNotFound)
	}

	// Delete and run on one archived task: whichever goes first, the task
	// ends gone (run first: the pending task is then deleted).
	gone := finishedTasks(t, b, "delrun", actRacePairs, archived)
	for i, errs := range raceActs(t, b, gone, broker.ActionDelete, broker.ActionRun) {
		if errs[0] != nil {
			t.Errorf("task %s: a delete beside a run: %v, want nil", gone[i], errs[0])
		}
		if errs[1] != nil && !errors.Is(errs[1], broker.ErrNotFound) {
			t.Errorf("task %s: a run beside a delete: %v, want nil or not_found", gone[i], errs[1])
		}
	}

	run := finishedTasks(t, b, "run", actRacePairs, archived)
	for i, errs := range raceActs(t, b, run, broker.ActionRun, broker.ActionRun) {
		requireOneApplied(t, run[i], "run", errs, broker.ErrInvalidState)
	}
	if t.Failed() {
		return
	}

	check := func(b broker.Broker) {
		t.Helper()
		RequireCounts(t, b, "del", Counts{})
		RequireCounts(t, b, "delrun", Counts{})
		RequireCounts(t, b, "run", Counts{pending: actRacePairs})
		for _, id := range append(deleted, gone...) {
			_, err := b.GetTask(t.Context(), id)
			requireErrIs(t, "GetTask of a deleted task", err, broker.ErrNotFound)
		}
	}
	check(b)
	b = e.Reopen()
	check(b)
	// Every task left is whole: one Lease hands them all out.
	ls, err := b.Lease(t.Context(), broker.LeaseParams{SessionID: "s2", Now: at(time.Minute), TTL: TTL,
		Picks: []broker.QueuePick{{Queue: "run", N: actRacePairs}, {Queue: "delrun", N: actRacePairs}}})
	if err != nil {
		t.Fatalf("Lease after the races: %v", err)
	}
	if len(ls) != actRacePairs {
		t.Fatalf("Lease after the races: %d tasks, want %d", len(ls), actRacePairs)
	}
}

// testActConcurrentWithPurge: a delete that races a Purge of the same
// finished tasks counts each task gone once.
func testActConcurrentWithPurge(t *testing.T, e *Env) {
	b := e.B
	ids := finishedTasks(t, b, "q", actRacePairs, completed)
	var wg sync.WaitGroup
	start := make(chan struct{})
	wg.Go(func() {
		<-start
		if _, err := b.Purge(t.Context(), PurgeAt(T0.Add(CompletedRetention+time.Hour))); err != nil {
			t.Errorf("Purge: %v", err)
		}
	})
	for _, id := range ids {
		wg.Go(func() {
			<-start
			r, err := b.Act(t.Context(), broker.ActParams{Action: broker.ActionDelete, IDs: []string{id}, Now: at(time.Second)})
			if err != nil {
				t.Errorf("Act: %v", err)
				return
			}
			if r[0].Err != nil && !errors.Is(r[0].Err, broker.ErrNotFound) {
				t.Errorf("task %s: a delete beside a purge: %v, want nil or not_found", id, r[0].Err)
			}
		})
	}
	close(start)
	wg.Wait()
	RequireCounts(t, b, "q", Counts{})
	b = e.Reopen()
	RequireCounts(t, b, "q", Counts{})
}

// testActRepeatedID: an id given twice in one call is acted on once; the
// second answer is what the first left.
func testActRepeatedID(t *testing.T, b broker.Broker) {
	ids := finishedTasks(t, b, "q", 2, completed)
	res := act(t, b, broker.ActionDelete, at(time.Second), ids[0], ids[0], ids[1])
	if res[0].Err != nil || res[2].Err != nil {
		t.Fatalf("delete: %v, %v", res[0].Err, res[2].Err)
	}
	requireErrIs(t, "the same id deleted again in the same call", res[1].Err, broker.ErrNotFound)
	RequireCounts(t, b, "q", Counts{})
	ids = finishedTasks(t, b, "r", 1, archived)
	res = act(t, b, broker.ActionRun, at(time.Second), ids[0], ids[0])
	if res[0].Err != nil {
		t.Fatalf("run: %v", res[0].Err)
	}
	requireErrIs(t, "the same id run again in the same call", res[1].Err, broker.ErrInvalidState)
	RequireCounts(t, b, "r", Counts{pending: 1})

	// A pending task canceled twice: the second is refused as any cancel of
	// a canceled task, not as a task to try again.
	pending := EnqueueOne(t, b, T0, NewTask("s")).ID
	res = act(t, b, broker.ActionCancel, at(time.Second), pending, pending)
	if res[0].Err != nil {
		t.Fatalf("cancel: %v", res[0].Err)
	}
	requireErrIs(t, "the same id canceled again in the same call", res[1].Err, broker.ErrInvalidState)
	if msg := res[1].Err.Error(); !strings.Contains(msg, "is canceled") || strings.Contains(msg, "try again") {
		t.Fatalf("the second cancel of one id: %q; want it to say the task is canceled, not to try again", msg)
	}
	RequireCounts(t, b, "s", Counts{canceled: 1})
}
