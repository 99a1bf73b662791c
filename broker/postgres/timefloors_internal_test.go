package postgres

import (
	"errors"
	"testing"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
	bt "github.com/conveyor-dev/conveyor/broker/brokertest"
	"github.com/conveyor-dev/conveyor/internal/pgtest"
	"github.com/conveyor-dev/conveyor/internal/testwait"
)

// TestPurgeFloors: a purge that found less than its limit raises the
// COMPLETED range's floor to its cutoff; a task completed afterwards at an
// earlier now (a straggler) lowers it when it commits, so that the next
// purge deletes it; one whose report was lost waits below the floor until
// the purge walks from the start, within timeFullEvery.
func TestPurgeFloors(t *testing.T) {
	t.Parallel()
	e, _ := openNode(t, pgtest.Schema(t, t.Name()))
	ctx := t.Context()
	t0 := time.Now()
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	enqueueAt(t, e, t0, bt.NewTask("q"), bt.NewTask("q"), bt.NewTask("q"))
	ls, err := e.Lease(ctx, broker.LeaseParams{SessionID: "s", Now: t0, TTL: time.Hour, Picks: []broker.QueuePick{{Queue: "q", N: 3}}})
	if err != nil || len(ls) != 3 {
		t.Fatalf("leased %d tasks (%v), want 3", len(ls), err)
	}
	complete := func(l broker.Lease, now time.Time) {
		t.Helper()
		if _, err := e.Complete(ctx, broker.Decision{SessionID: "s", Lease: broker.LeaseRef{TaskID: l.Task.ID, Token: l.Token},
			Kind: broker.DecideComplete, Now: now, Verdict: true}); err != nil {
			t.Fatal(err)
		}
	}
	purge := func(now, completedBefore time.Time) {
		t.Helper()
		if _, err := e.Purge(ctx, broker.PurgeParams{Now: now, CompletedBefore: completedBefore, ArchivedBefore: completedBefore, Limit: 100}); err != nil {
			t.Fatal(err)
		}
	}
	stored := func(id string) bool {
		t.Helper()
		_, err := e.GetTask(ctx, id)
		if err != nil && !errors.Is(err, broker.ErrNotFound) {
			t.Fatal(err)
		}
		return err == nil
	}
	floor := func() int64 {
		e.mu.Lock()
		defer e.mu.Unlock()
		return e.purgeFloors.at[rangeEnded+classCompleted]
	}
	a, straggler, lost := ls[0], ls[1], ls[2]
	complete(a, t0)
	purge(at(10*time.Second), at(5*time.Second))
	if stored(a.Task.ID) {
		t.Fatal("the first purge left the task completed before its cutoff")
	}
	if f := floor(); f != nanos(at(5*time.Second)) {
		t.Fatalf("the floor is %d after a purge that found less than its limit, want its cutoff %d", f, nanos(at(5*time.Second)))
	}

	complete(straggler, at(time.Second))
	purge(at(11*time.Second), at(6*time.Second))
	if stored(straggler.Task.ID) {
		t.Fatal("a task completed below the floor after the purge that raised it was not purged by the next")
	}

	complete(lost, at(2*time.Second))
	e.mu.Lock()
	e.purgeFloors.at[rangeEnded+classCompleted] = nanos(at(6 * time.Second)) // as if its report had been lost
	e.mu.Unlock()
	purge(at(12*time.Second), at(7*time.Second))
	if !stored(lost.Task.ID) {
		t.Fatal("the purge walked below its floor before timeFullEvery passed")
	}
	purge(at(10*time.Second+timeFullEvery), at(8*time.Second))
	if stored(lost.Task.ID) {
		t.Fatal("the purge's walk from the start, timeFullEvery after the last, did not delete a task below the floor")
	}
}

// TestTimeFloorsCapTheRound: a time reported while a round runs
// caps what the round raises the floor to; a round that found its limit
// (or failed) raises nothing; a purge that starts while another runs
// walks from the start and raises nothing.
func TestTimeFloorsCapTheRound(t *testing.T) {
	var f timeFloors
	const r = rangeEnded + classCompleted
	cut := [maxTimeRanges]int64{100, 200, 300}
	if _, owner := f.startRoundLocked(1000); !owner {
		t.Fatal("the only round does not own the floors")
	}
	if floor, owner := f.startRoundLocked(1001); owner || floor != ([maxTimeRanges]int64{}) {
		t.Fatalf("a second round at once got %v (owner %v), want zero floors and no ownership", floor, owner)
	}
	f.lowerLocked(r, 150)
	f.endRoundLocked(cut, true)
	if want := [maxTimeRanges]int64{100, 150, 300}; f.at != want {
		t.Fatalf("floors %v after a round with a report of 150, want %v", f.at, want)
	}
	floor, _ := f.startRoundLocked(1002)
	if floor[r] != 150 {
		t.Fatalf("the next round walks from %d, want 150", floor[r])
	}
	f.endRoundLocked([maxTimeRanges]int64{900, 900, 900}, false)
	if f.at[r] != 150 {
		t.Fatalf("a round that found its limit raised the floor to %d", f.at[r])
	}
	f.startRoundLocked(1003)
	f.lowerLocked(rangeOwn, 40)
	f.endRoundLocked([maxTimeRanges]int64{900, 900, 900}, true)
	if want := [maxTimeRanges]int64{40, 900, 900}; f.at != want {
		t.Fatalf("floors %v, want %v", f.at, want)
	}
	if floor, _ := f.startRoundLocked(1003 + int64(timeFullEvery)); floor != ([maxTimeRanges]int64{}) {
		t.Fatalf("the round timeFullEvery after the last full walk walks from %v, want the start", floor)
	}
}

// TestPromoteFloors: a promoter round that left nothing due raises the
// due range's floor; a task scheduled afterwards for an earlier time (a
// straggler) lowers it when it commits, so that the next round promotes
// it; one whose report was lost waits below the floor until the promoter
// walks from the start, within timeFullEvery.
func TestPromoteFloors(t *testing.T) {
	t.Parallel()
	e, _ := openNode(t, pgtest.Schema(t, t.Name()))
	ctx := t.Context()
	t0 := time.Now()
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	schedule := func(due time.Time) string {
		t.Helper()
		nt := bt.NewTask("q")
		nt.ProcessAt = due
		task := enqueueAt(t, e, t0, nt)[0]
		if task.State != broker.StateScheduled {
			t.Fatalf("a task due at %v was stored %v, want scheduled", due, task.State)
		}
		return task.ID
	}
	promote := func(now time.Time) {
		t.Helper()
		if _, err := e.PromoteDue(ctx, now); err != nil {
			t.Fatal(err)
		}
	}
	pending := func(id string) bool {
		t.Helper()
		task, err := e.GetTask(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return task.State == broker.StatePending
	}
	floor := func() int64 {
		e.mu.Lock()
		defer e.mu.Unlock()
		return e.promoteFloors.at[rangeDue]
	}
	testwait.Until(t, 30*time.Second, "the node to lead (only the leader promotes)", func() bool { return leading(e) })
	first := schedule(at(time.Second))
	promote(at(5 * time.Second))
	if !pending(first) {
		t.Fatal("the first round left the due task scheduled")
	}
	if f := floor(); f != nanos(at(5*time.Second)) {
		t.Fatalf("the due floor is %d after a round that left nothing, want its now %d", f, nanos(at(5*time.Second)))
	}

	straggler := schedule(at(2 * time.Second))
	promote(at(6 * time.Second))
	if !pending(straggler) {
		t.Fatal("a task due below the floor, scheduled after the round that raised it, was not promoted by the next")
	}

	lost := schedule(at(3 * time.Second))
	e.mu.Lock()
	e.promoteFloors.at[rangeDue] = nanos(at(6 * time.Second)) // as if its report had been lost
	e.mu.Unlock()
	promote(at(7 * time.Second))
	if pending(lost) {
		t.Fatal("the promoter walked below its floor before timeFullEvery passed")
	}
	promote(at(5*time.Second + timeFullEvery))
	if !pending(lost) {
		t.Fatal("the promoter's walk from the start, timeFullEvery after the last, did not promote a task below the floor")
	}
}
