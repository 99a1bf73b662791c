package brokertest

import (
	"errors"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
)

// The cases of a queue's bound on waiting tasks (QueueConfig.MaxWaiting).

func boundCases() []testCase {
	return []testCase{
		{name: "WhatCounts", fn: testBoundWhatCounts},
		{name: "ItemsRefusedOnTheirOwn", fn: testBoundItems},
		{name: "OtherRefusalsFirst", fn: testBoundOtherRefusalsFirst},
		{name: "EnqueueTxRefusedWhole", fn: testBoundTx},
		{name: "HonouredUnderConcurrency", fn: testBoundConcurrent},
		{name: "RoomSignalled", env: testBoundRoomSignalled},
		{name: "RoomSignalledOnlyBelowTheBound", env: testBoundRoomBelow},
		{name: "RoomSignalledWhenRaised", env: testBoundRaised},
		{name: "RoomSignalledWhileWaitedFor", env: testBoundSignalledWhileWaited},
		{name: "TasksInTheQueueNeverRefused", fn: testBoundNeverRefused},
		{name: "CronFireRefused", fn: testBoundCron},
		{name: "SurvivesRestart", env: testBoundRestart},
		{name: "ForgottenWithTheQueue", fn: testBoundDeleted},
	}
}

// bound sets queue's MaxWaiting, keeping the rest of its configuration.
func bound(t testing.TB, b broker.Broker, queue string, n int64) {
	t.Helper()
	info, err := b.UpdateQueueConfig(t.Context(), queue, func(c *broker.QueueConfig) { c.MaxWaiting = n })
	if err != nil {
		t.Fatalf("UpdateQueueConfig max_waiting %d: %v", n, err)
	}
	if info.Config.MaxWaiting != n {
		t.Fatalf("UpdateQueueConfig answered max_waiting %d, want %d", info.Config.MaxWaiting, n)
	}
}

// requireFull fails unless err is a refusal by queue's bound of max,
// which names both.
func requireFull(t testing.TB, what string, err error, queue string, max int64) {
	t.Helper()
	var full *broker.QueueFullError
	if !errors.Is(err, broker.ErrQueueFull) || !errors.As(err, &full) {
		t.Fatalf("%s: got error %v, want a *broker.QueueFullError (ErrQueueFull)", what, err)
	}
	if full.Queue != queue || full.MaxWaiting != max {
		t.Fatalf("%s: refused by queue %q with bound %d, want %q and %d", what, full.Queue, full.MaxWaiting, queue, max)
	}
}

// refusedOne enqueues one more task of queue and fails unless its bound
// refused it.
func refusedOne(t testing.TB, b broker.Broker, now time.Time, queue string, max int64) {
	t.Helper()
	res, err := b.Enqueue(t.Context(), broker.EnqueueParams{Tasks: WithStates([]broker.NewTask{NewTask(queue)}, now), Now: now})
	if err != nil {
		t.Fatalf("Enqueue: %v", err)
	}
	requireFull(t, "an enqueue into a full queue", res[0].Err, queue, max)
	if res[0].Task != nil {
		t.Fatalf("a refused enqueue returned task %s", res[0].Task.ID)
	}
}

// testBoundWhatCounts: SCHEDULED, PENDING, RETRY, AGGREGATING and BLOCKED
// count against the bound; ACTIVE and terminal tasks do not.
func testBoundWhatCounts(t *testing.T, b broker.Broker) {
	bound(t, b, "q", 5)
	EnqueueOne(t, b, T0, NewTask("q"))
	Succeed(t, b, "s1", LeaseOne(t, b, "s1", "q", T0), T0)
	p := EnqueueOne(t, b, T0, NewTask("q"))
	EnqueueOne(t, b, T0, dependent("q", dep(p.ID, 0)))
	s := NewTask("q")
	s.ProcessAt = at(time.Hour)
	EnqueueOne(t, b, T0, s)
	EnqueueOne(t, b, T0, grouped("q", "g", "t"))
	EnqueueOne(t, b, T0, NewTask("q"))
	RequireCounts(t, b, "q", Counts{completed: 1, pending: 2, blocked: 1, scheduled: 1, aggregating: 1})
	refusedOne(t, b, T0, "q", 5)

	// p leased: ACTIVE does not count.
	l := LeaseOne(t, b, "s1", "q", T0)
	if l.Task.ID != p.ID {
		t.Fatalf("leased %s, want %s", l.Task.ID, p.ID)
	}
	EnqueueOne(t, b, T0, NewTask("q"))
	refusedOne(t, b, T0, "q", 5)
	// Back to RETRY: it counts again, past the bound (it was in the queue).
	Fail(t, b, "s1", l, "flaky", T0, at(time.Hour))
	RequireCounts(t, b, "q", Counts{completed: 1, pending: 2, blocked: 1, scheduled: 1, aggregating: 1, retry: 1})
	refusedOne(t, b, T0, "q", 5)
}

// testBoundItems: the tasks of one Enqueue are admitted in order while
// there is room, each against the ones before it, and the rest refused
// on their own; a task of another queue in the call is not affected.
func testBoundItems(t *testing.T, b broker.Broker) {
	bound(t, b, "q", 3)
	EnqueueOne(t, b, T0, NewTask("q"))
	res := enqueueResults(t, b, T0, NewTask("q"), NewTask("q"), NewTask("other"), NewTask("q"), NewTask("q"))
	for i, r := range res {
		switch i {
		case 0, 1, 2:
			if r.Err != nil || r.Task == nil {
				t.Fatalf("results[%d] = %v, %v: there was room for it", i, r.Task, r.Err)
			}
		default:
			requireFull(t, "an item past the bound", r.Err, "q", 3)
			requireItemErr(t, res, i, broker.ErrQueueFull)
		}
	}
	RequireCounts(t, b, "q", Counts{pending: 3})
	RequireCounts(t, b, "other", Counts{pending: 1})
	if !strings.Contains(res[3].Err.Error(), `"q"`) || !strings.Contains(res[3].Err.Error(), "3") {
		t.Fatalf("the refusal %q names neither the queue nor its bound", res[3].Err)
	}
}

// testBoundOtherRefusalsFirst: a task that would be refused anyway (its
// unique key held, its id taken) is refused for that, not for the room
// it could never use.
func testBoundOtherRefusalsFirst(t *testing.T, b broker.Broker) {
	bound(t, b, "q", 1)
	held := NewTask("q")
	held.ID, held.UniqueKey = NewID(), "k"
	EnqueueOne(t, b, T0, held)
	again := NewTask("q")
	again.UniqueKey = "k"
	sameID := NewTask("q")
	sameID.ID = held.ID
	res := enqueueResults(t, b, T0, again, sameID)
	requireItemErr(t, res, 0, broker.ErrAlreadyExists)
	requireItemErr(t, res, 1, broker.ErrAlreadyExists)
}

// testBoundTx: an EnqueueTx whose new tasks do not all fit is refused
// whole, naming the queue; an item naming an existing task takes no room.
func testBoundTx(t *testing.T, b broker.Broker) {
	bound(t, b, "q", 3)
	first := NewTask("q")
	first.ID = NewID()
	EnqueueOne(t, b, T0, first)
	before, err := b.Queues(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	items := []broker.NewTask{NewTask("other"), NewTask("q"), NewTask("q"), NewTask("q")}
	var ids []string
	for i := range items {
		items[i].ID = NewID()
		ids = append(ids, items[i].ID)
	}
	_, err = b.EnqueueTx(t.Context(), broker.EnqueueParams{Tasks: WithStates(items, T0), Now: T0})
	requireFull(t, "an EnqueueTx with one task too many", err, "q", 3)
	requireTxNothingStored(t, b, before, ids...)

	// The existing task's id is a no-op: two new tasks fit.
	out, err := b.EnqueueTx(t.Context(), broker.EnqueueParams{Tasks: WithStates([]broker.NewTask{first, items[1], items[2]}, T0), Now: T0})
	if err != nil {
		t.Fatalf("EnqueueTx of an existing task and two that fit: %v", err)
	}
	if !out[0].Existed || out[1].Existed || out[2].Existed {
		t.Fatalf("EnqueueTx answered Existed %v %v %v, want true false false", out[0].Existed, out[1].Existed, out[2].Existed)
	}
	RequireCounts(t, b, "q", Counts{pending: 3})
	_, err = b.EnqueueTx(t.Context(), broker.EnqueueParams{Tasks: WithStates([]broker.NewTask{items[3]}, T0), Now: T0})
	requireFull(t, "an EnqueueTx into a full queue", err, "q", 3)
}

// testBoundConcurrent: enqueues racing for the last room never take the
// queue past its bound, whether one task per call or many.
func testBoundConcurrent(t *testing.T, b broker.Broker) {
	const max, producers, calls = 25, 8, 10
	bound(t, b, "q", max)
	single := WithStates([]broker.NewTask{NewTask("q")}, T0)
	batch := WithStates([]broker.NewTask{NewTask("q"), NewTask("q"), NewTask("q"), NewTask("q"), NewTask("q")}, T0)
	var (
		wg              sync.WaitGroup
		mu              sync.Mutex
		stored, refused int
		unexpected      []error
	)
	for p := range producers {
		wg.Go(func() {
			tasks := single
			if p%2 == 0 {
				tasks = batch
			}
			for range calls {
				res, err := b.Enqueue(t.Context(), broker.EnqueueParams{Tasks: tasks, Now: T0})
				mu.Lock()
				if err != nil {
					unexpected = append(unexpected, err)
				}
				for _, r := range res {
					switch {
					case r.Err == nil:
						stored++
					case errors.Is(r.Err, broker.ErrQueueFull):
						refused++
					default:
						unexpected = append(unexpected, r.Err)
					}
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(unexpected) > 0 {
		t.Fatalf("unexpected errors: %v", unexpected)
	}
	if stored != max {
		t.Fatalf("%d tasks stored (%d refused) into a queue bounded at %d", stored, refused, max)
	}
	RequireCounts(t, b, "q", Counts{pending: max})
}

// testBoundRoomSignalled: a queue that refused a task signals QueueRoom
// once a task leaves the waiting states, every way one can: leased,
// canceled, deleted, archived, expired; and the next enqueue fits.
func testBoundRoomSignalled(t *testing.T, e *Env) {
	b, n := e.B, e.Notes
	bound(t, b, "q", 1)
	plain := func(time.Time) broker.NewTask { return NewTask("q") }
	ways := []struct {
		name string
		task func(now time.Time) broker.NewTask
		out  func(id string, now time.Time)
	}{
		{"lease", plain, func(id string, now time.Time) {
			if l := LeaseOne(t, b, "s1", "q", now); l.Task.ID != id {
				t.Fatalf("leased %s, want %s", l.Task.ID, id)
			}
		}},
		{"cancel", plain, func(id string, now time.Time) {
			actOK(t, b, broker.ActionCancel, now, id)
		}},
		{"delete", plain, func(id string, now time.Time) {
			actOK(t, b, broker.ActionDelete, now, id)
		}},
		{"archive", plain, func(id string, now time.Time) {
			actOK(t, b, broker.ActionArchive, now, id)
		}},
		{"expire", func(now time.Time) broker.NewTask {
			nt := NewTask("q")
			nt.ProcessAt, nt.ExpiresAt = now.Add(time.Hour), now.Add(time.Minute)
			return nt
		}, func(_ string, now time.Time) { promote(t, b, now.Add(2*time.Minute)) }},
		{"cancel of a blocked task", func(now time.Time) broker.NewTask {
			return dependent("q", dep(EnqueueOne(t, b, now, NewTask("deps")).ID, 0))
		}, func(id string, now time.Time) { actOK(t, b, broker.ActionCancel, now, id) }},
	}
	now := T0
	for _, w := range ways {
		task := EnqueueOne(t, b, now, w.task(now))
		refusedOne(t, b, now, "q", 1)
		if got := n.Rooms(); len(got) != 0 {
			t.Fatalf("%s: QueueRoom %v while the queue is still full", w.name, got)
		}
		w.out(task.ID, now)
		requireRooms(t, w.name, n, Room{"q", 1})
		now = now.Add(time.Hour)
	}
	EnqueueOne(t, b, now, NewTask("q"))
	n.requireNoOverflow(t)
}

// requireRooms fails unless the QueueRoom signals queued since the last
// check are want, in order.
func requireRooms(t testing.TB, after string, n *Notes, want ...Room) {
	t.Helper()
	if got := n.Rooms(); !slices.Equal(got, want) {
		t.Fatalf("after %s: QueueRoom signals %v, want %v", after, got, want)
	}
	n.requireNoOverflow(t)
}

// testBoundSignalledWhileWaited: room is signalled at each change that
// makes it, for as long as the notifier answers that someone waits.
func testBoundSignalledWhileWaited(t *testing.T, e *Env) {
	b, n := e.B, e.Notes
	n.SetWaiting(true)
	bound(t, b, "q", 2)
	Enqueue(t, b, T0, NewTask("q"), NewTask("q"))
	refusedOne(t, b, T0, "q", 2)
	LeaseOne(t, b, "s1", "q", T0)
	requireRooms(t, "a lease", n, Room{"q", 1})
	LeaseOne(t, b, "s1", "q", T0)
	requireRooms(t, "a second lease", n, Room{"q", 2})
	Enqueue(t, b, T0, NewTask("q"), NewTask("q"))
	requireRooms(t, "enqueues, which make no room", n)
	n.SetWaiting(false)
	LeaseOne(t, b, "s1", "q", T0)
	requireRooms(t, "a lease, answered by nobody waiting", n, Room{"q", 1})
	LeaseOne(t, b, "s1", "q", T0)
	requireRooms(t, "a lease once nobody waits", n)
}

// testBoundRoomBelow: a queue past its bound (lowered under what it
// holds) signals only once it is below it.
func testBoundRoomBelow(t *testing.T, e *Env) {
	b, n := e.B, e.Notes
	Enqueue(t, b, T0, NewTask("q"), NewTask("q"), NewTask("q"))
	bound(t, b, "q", 2)
	refusedOne(t, b, T0, "q", 2)
	LeaseOne(t, b, "s1", "q", T0)
	requireRooms(t, "2 tasks waiting in a queue bounded at 2", n)
	LeaseOne(t, b, "s1", "q", T0)
	requireRooms(t, "1 task waiting in a queue bounded at 2", n, Room{"q", 1})
	EnqueueOne(t, b, T0, NewTask("q"))
	refusedOne(t, b, T0, "q", 2)
}

// testBoundRaised: raising or removing the bound of a queue that refused
// signals its room.
func testBoundRaised(t *testing.T, e *Env) {
	b, n := e.B, e.Notes
	bound(t, b, "q", 1)
	EnqueueOne(t, b, T0, NewTask("q"))
	refusedOne(t, b, T0, "q", 1)
	bound(t, b, "q", 2)
	requireRooms(t, "the bound raised", n, Room{"q", 1})
	EnqueueOne(t, b, T0, NewTask("q"))
	refusedOne(t, b, T0, "q", 2)
	bound(t, b, "q", 0)
	requireRooms(t, "the bound removed", n, Room{"q", math.MaxInt64})
	Enqueue(t, b, T0, NewTask("q"), NewTask("q"))
}

// testBoundNeverRefused: tasks already in the queue come back to the
// waiting states past its bound: a retry, a release, a lapsed lease,
// RunTask, a dependent released, members of a fired group.
func testBoundNeverRefused(t *testing.T, b broker.Broker) {
	policy(t, b, "q", 2, time.Hour, time.Hour)
	dependency := EnqueueOne(t, b, T0, NewTask("deps"))
	waiter := EnqueueOne(t, b, T0, dependent("q", dep(dependency.ID, 0)))
	Enqueue(t, b, T0, grouped("q", "g", "t"), grouped("q", "g", "t")) // fires by size
	Enqueue(t, b, T0, NewTask("q"), NewTask("q"), NewTask("q"), NewTask("q"))
	ls := Lease(t, b, "s1", "q", 10, T0, TTL)
	if len(ls) != 4 {
		t.Fatalf("leased %d tasks, want the 4 pending", len(ls))
	}
	if gl := leaseGroups(t, b, "q", 1, T0, "t"); len(gl) != 1 || len(gl[0].Leases) != 2 {
		t.Fatalf("LeaseGroups = %+v, want the fired group of 2", gl)
	}
	bound(t, b, "q", 1) // the blocked task waits: the queue is full
	refusedOne(t, b, T0, "q", 1)

	Fail(t, b, "s1", ls[0], "retry", T0, at(time.Hour))
	if err := b.Release(t.Context(), broker.ReleaseParams{SessionID: "s1", Leases: []broker.LeaseRef{Ref(ls[1])}, Now: T0}); err != nil {
		t.Fatalf("Release into a full queue: %v", err)
	}
	Archive(t, b, "s1", ls[2], "for good", T0)
	actOK(t, b, broker.ActionRun, T0, ls[2].Task.ID)
	if lapsed := Reap(t, b, T0.Add(TTL)); len(lapsed) != 3 {
		t.Fatalf("Reap = %v, want the last lease and the group's two", lapsed)
	}
	Succeed(t, b, "s2", LeaseOne(t, b, "s2", "deps", T0), T0)
	RequireState(t, b, waiter.ID, pending)
	got := Queue(t, b, "q").Counts
	if got.Waiting() != 7 || got[retry] != 1 {
		t.Fatalf("queue counts %s, want 7 waiting (1 of them in RETRY): every task came back", formatCounts(got))
	}
	refusedOne(t, b, T0, "q", 1)
}

// testBoundCron: a fire into a full queue is applied with no task, its
// refusal recorded on the entry; the next fire that enqueues clears it.
func testBoundCron(t *testing.T, b broker.Broker) {
	ctx := t.Context()
	bound(t, b, "q", 1)
	EnqueueOne(t, b, T0, NewTask("q"))
	if _, err := b.CreateCron(ctx, cronEntry("a")); err != nil {
		t.Fatal(err)
	}
	task, err := b.FireCron(ctx, fire("a", at(time.Minute), at(2*time.Minute)))
	requireFull(t, "a cron fire into a full queue", err, "q", 1)
	if task != nil {
		t.Fatalf("a refused fire returned task %s", task.ID)
	}
	c, err := b.Cron(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if !c.LastFire.Equal(at(time.Minute)) || !c.NextRun.Equal(at(2*time.Minute)) || !c.LastRun.Equal(at(time.Minute)) ||
		c.LastTaskID != "" || !strings.Contains(c.LastError, "queue full") {
		t.Fatalf("the refused fire is recorded as %+v, want it applied with LastError saying the queue was full", c)
	}
	_, err = b.FireCron(ctx, fire("a", at(time.Minute), at(2*time.Minute)))
	requireErrIs(t, "the refused fire again", err, broker.ErrAlreadyFired)
	RequireCounts(t, b, "q", Counts{pending: 1})

	LeaseOne(t, b, "s1", "q", T0)
	task, err = b.FireCron(ctx, fire("a", at(2*time.Minute), at(3*time.Minute)))
	if err != nil || task == nil {
		t.Fatalf("a fire with room = %v, %v", task, err)
	}
	if c, err = b.Cron(ctx, "a"); err != nil || c.LastTaskID != task.ID || c.LastError != "" {
		t.Fatalf("after a fire that enqueued: %+v, %v; want LastTaskID %s and no LastError", c, err, task.ID)
	}
}

// testBoundRestart: the bound is stored with the queue, and still
// refuses after a restart, against the tasks reloaded; room is then
// signalled as before.
func testBoundRestart(t *testing.T, e *Env) {
	bound(t, e.B, "q", 2)
	Enqueue(t, e.B, T0, NewTask("q"), NewTask("q"))
	b := e.Reopen()
	if got := Queue(t, b, "q").Config.MaxWaiting; got != 2 {
		t.Fatalf("after a restart max_waiting is %d, want 2", got)
	}
	refusedOne(t, b, T0, "q", 2)
	e.Notes.Rooms() // a reload may signal room it cannot know was waited for
	LeaseOne(t, b, "s1", "q", T0)
	requireRooms(t, "a lease after a restart", e.Notes, Room{"q", 1})
	EnqueueOne(t, b, T0, NewTask("q"))
	refusedOne(t, b, T0, "q", 2)
}

// testBoundDeleted: a deleted queue's bound goes with it.
func testBoundDeleted(t *testing.T, b broker.Broker) {
	bound(t, b, "q", 1)
	deleteQueue(t, b, "q")
	Enqueue(t, b, T0, NewTask("q"), NewTask("q"))
}
