package brokertest

import (
	"strings"
	"testing"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
)

func deleteQueueCases() []testCase {
	return []testCase{
		{name: "Empty", fn: testDeleteQueueEmpty},
		{name: "RefusedWhileHoldingTasks", fn: testDeleteQueueHoldingTasks},
		{name: "RefusedWithCron", fn: testDeleteQueueWithCron},
		{name: "NotFound", fn: testDeleteQueueNotFound},
		{name: "NameStartsFresh", fn: testDeleteQueueStartsFresh},
		{name: "OldGroupsDoNotReachANewQueue", fn: testDeleteQueueOldGroups},
		{name: "SurvivesRestart", env: testDeleteQueueRestart},
	}
}

// usedQueue makes queue q paused, configured, with non-zero totals and no
// task left, and returns its configuration.
func usedQueue(t *testing.T, b broker.Broker, q string) broker.QueueConfig {
	t.Helper()
	cfg := broker.QueueConfig{ConcurrencyLimit: 3, MaxActive: 7, RatePerSecond: 5}
	setConfig(t, b, q, cfg)
	done := EnqueueOne(t, b, T0, NewTask(q))
	Succeed(t, b, "s1", LeaseOne(t, b, "s1", q, T0), T0)
	actOK(t, b, broker.ActionDelete, T0, done.ID)
	if _, err := b.SetQueuePaused(t.Context(), q, true); err != nil {
		t.Fatal(err)
	}
	info := Queue(t, b, q)
	if info.Name != q || !info.Paused || info.Processed != 1 || info.Enqueued != 1 || info.Counts != (broker.Counts{}) {
		t.Fatalf("before the delete, %s = %+v", q, info)
	}
	return cfg
}

func deleteQueue(t *testing.T, b broker.Broker, q string) {
	t.Helper()
	if err := b.DeleteQueue(t.Context(), q); err != nil {
		t.Fatalf("DeleteQueue %s: %v", q, err)
	}
}

// requireForgotten fails unless q is neither listed nor remembered.
func requireForgotten(t *testing.T, b broker.Broker, q string) {
	t.Helper()
	qs, err := b.Queues(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, info := range qs {
		if info.Name == q {
			t.Fatalf("Queues still lists %s: %+v", q, info)
		}
	}
	info, err := b.Queue(t.Context(), q)
	if err != nil {
		t.Fatal(err)
	}
	if info != (broker.QueueInfo{Name: q}) {
		t.Fatalf("Queue %s after its delete = %+v, want a queue never seen", q, info)
	}
}

func testDeleteQueueEmpty(t *testing.T, b broker.Broker) {
	usedQueue(t, b, "gone")
	EnqueueOne(t, b, T0, NewTask("kept"))
	deleteQueue(t, b, "gone")
	requireForgotten(t, b, "gone")
	RequireCounts(t, b, "kept", Counts{pending: 1})
	requireErrIs(t, "a second DeleteQueue", b.DeleteQueue(t.Context(), "gone"), broker.ErrNotFound)
}

// testDeleteQueueHoldingTasks: a queue holding one task, in each state
// in turn, is refused and kept, and the refusal names what it holds.
func testDeleteQueueHoldingTasks(t *testing.T, b broker.Broker) {
	leased := func(q string) broker.Lease {
		EnqueueOne(t, b, T0, NewTask(q))
		return LeaseOne(t, b, "s1", q, T0)
	}
	setup := map[broker.State]func(q string) string{
		pending: func(q string) string { return EnqueueOne(t, b, T0, NewTask(q)).ID },
		scheduled: func(q string) string {
			nt := NewTask(q)
			nt.ProcessAt = at(time.Hour)
			return EnqueueOne(t, b, T0, nt).ID
		},
		active: func(q string) string { return leased(q).Task.ID },
		retry: func(q string) string {
			l := leased(q)
			Fail(t, b, "s1", l, "flaky", T0, at(time.Hour))
			return l.Task.ID
		},
		completed: func(q string) string { l := leased(q); Succeed(t, b, "s1", l, T0); return l.Task.ID },
		archived:  func(q string) string { l := leased(q); Archive(t, b, "s1", l, "bad", T0); return l.Task.ID },
		canceled: func(q string) string {
			id := EnqueueOne(t, b, T0, NewTask(q)).ID
			actOK(t, b, broker.ActionCancel, T0, id)
			return id
		},
		aggregating: func(q string) string { return EnqueueOne(t, b, T0, grouped(q, "g", "test")).ID },
		blocked: func(q string) string {
			dep := NewTask("deps")
			dep.ProcessAt = at(time.Hour)
			nt := NewTask(q)
			nt.DependsOn = []broker.Dependency{{TaskID: EnqueueOne(t, b, T0, dep).ID}}
			return EnqueueOne(t, b, T0, nt).ID
		},
	}
	for s, fill := range setup {
		q := "holds-" + s.String()
		RequireState(t, b, fill(q), s)
		err := b.DeleteQueue(t.Context(), q)
		requireErrIs(t, "DeleteQueue of "+q, err, broker.ErrInvalidState)
		if want := "1 " + s.String(); !strings.Contains(err.Error(), want) {
			t.Errorf("DeleteQueue of %s: %q does not say what is left (%q)", q, err, want)
		}
		RequireCounts(t, b, q, Counts{s: 1})
	}
	// Deleting the tasks makes room for deleting the queue.
	for _, s := range []broker.State{completed, archived, canceled} {
		q := "holds-" + s.String()
		ids := taskIDs(t, b, q)
		actOK(t, b, broker.ActionDelete, T0, ids...)
		deleteQueue(t, b, q)
		requireForgotten(t, b, q)
	}
}

// taskIDs lists every task of queue q.
func taskIDs(t *testing.T, b broker.Broker, q string) []string {
	t.Helper()
	page, err := b.ListTasks(t.Context(), broker.ListParams{Queue: q, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, len(page.Tasks))
	for i, task := range page.Tasks {
		ids[i] = task.ID
	}
	return ids
}

func testDeleteQueueWithCron(t *testing.T, b broker.Broker) {
	c := cronEntry("nightly")
	c.Paused = true // a paused entry would still bring the queue back once resumed
	if _, err := b.CreateCron(t.Context(), c); err != nil {
		t.Fatal(err)
	}
	if _, err := b.SetQueuePaused(t.Context(), c.Queue, false); err != nil {
		t.Fatal(err)
	}
	err := b.DeleteQueue(t.Context(), c.Queue)
	requireErrIs(t, "DeleteQueue with a cron entry", err, broker.ErrInvalidState)
	if !strings.Contains(err.Error(), `"nightly"`) {
		t.Errorf("DeleteQueue with a cron entry: %q does not name the entry", err)
	}
	if Queue(t, b, c.Queue).Name != c.Queue {
		t.Fatalf("the refused queue is no longer listed")
	}
	if err := b.DeleteCron(t.Context(), c.ID); err != nil {
		t.Fatal(err)
	}
	deleteQueue(t, b, c.Queue)
	requireForgotten(t, b, c.Queue)
}

func testDeleteQueueNotFound(t *testing.T, b broker.Broker) {
	requireErrIs(t, "DeleteQueue of a queue never seen", b.DeleteQueue(t.Context(), "nowhere"), broker.ErrNotFound)
}

// testDeleteQueueStartsFresh: the name used again is a new queue: not
// paused, the default configuration, totals from zero; and its tasks run.
func testDeleteQueueStartsFresh(t *testing.T, b broker.Broker) {
	usedQueue(t, b, "q")
	deleteQueue(t, b, "q")
	task := EnqueueOne(t, b, T0, NewTask("q"))
	info := Queue(t, b, "q")
	want := broker.QueueInfo{Name: "q", Enqueued: 1}
	want.Counts[pending] = 1
	if info != want {
		t.Fatalf("the queue used again = %+v, want %+v", info, want)
	}
	if l := LeaseOne(t, b, "s1", "q", T0); l.Task.ID != task.ID {
		t.Fatalf("leased %s, want %s", l.Task.ID, task.ID)
	}
	requireErrIs(t, "DeleteQueue of the queue used again", b.DeleteQueue(t.Context(), "q"), broker.ErrInvalidState)
}

// testDeleteQueueOldGroups: a group the deleted queue gathered, whose
// members all left, must not fire later into the queues created after
// the delete (an engine that reuses the deleted queue's slot must drop
// the group with it).
func testDeleteQueueOldGroups(t *testing.T, b broker.Broker) {
	policy(t, b, "old", 10, time.Minute, time.Minute)
	left := EnqueueOne(t, b, T0, grouped("old", "g", "test"))
	actOK(t, b, broker.ActionDelete, T0, left.ID)
	deleteQueue(t, b, "old")
	for _, q := range []string{"new", "old"} {
		EnqueueOne(t, b, T0, NewTask(q))
	}
	promote(t, b, at(time.Hour))
	for _, q := range []string{"new", "old"} {
		if n := readyGroups(b, q, "test"); n != 0 {
			t.Fatalf("ReadyGroups(%s) = %d after the deleted queue's group was due, want 0", q, n)
		}
		if gs, err := b.Groups(t.Context(), q); err != nil || len(gs) != 0 {
			t.Fatalf("Groups(%s) = %+v, %v", q, gs, err)
		}
		RequireCounts(t, b, q, Counts{pending: 1})
	}
}

// testDeleteQueueRestart: the delete is durable, and the queues created
// after it (which may take its place) keep what they hold.
func testDeleteQueueRestart(t *testing.T, b *Env) {
	usedQueue(t, b.B, "gone")
	usedQueue(t, b.B, "other")
	deleteQueue(t, b.B, "gone")
	EnqueueOne(t, b.B, T0, NewTask("later"))
	b.Reopen()
	requireForgotten(t, b.B, "gone")
	if info := Queue(t, b.B, "other"); !info.Paused || info.Processed != 1 {
		t.Fatalf("the queue kept = %+v", info)
	}
	RequireCounts(t, b.B, "later", Counts{pending: 1})
	deleteQueue(t, b.B, "other")
	b.Reopen()
	requireForgotten(t, b.B, "other")
	RequireCounts(t, b.B, "later", Counts{pending: 1})
	if l := LeaseOne(t, b.B, "s1", "later", T0); l.Task.Queue != "later" {
		t.Fatalf("leased a task of %q", l.Task.Queue)
	}
}
