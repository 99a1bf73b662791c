package bolt_test

import (
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
	"github.com/conveyor-dev/conveyor/broker/bolt"
	bt "github.com/conveyor-dev/conveyor/broker/brokertest"
)

// chanNotifier records an engine's signals in buffered channels. It never
// blocks (the engine calls it under its lock); a full buffer is recorded
// and fails the test.
type chanNotifier struct {
	ready    chan string
	timers   chan struct{}
	lapsed   chan broker.LapsedLease
	overflow atomic.Bool
}

func newChanNotifier() *chanNotifier {
	return &chanNotifier{ready: make(chan string, 256), timers: make(chan struct{}, 256), lapsed: make(chan broker.LapsedLease, 256)}
}

func (n *chanNotifier) TasksReady(queue string) {
	select {
	case n.ready <- queue:
	default:
		n.overflow.Store(true)
	}
}

func (n *chanNotifier) LeaseLapsed(l broker.LapsedLease) {
	select {
	case n.lapsed <- l:
	default:
		n.overflow.Store(true)
	}
}

func (n *chanNotifier) TimersChanged() {
	select {
	case n.timers <- struct{}{}:
	default:
		n.overflow.Store(true)
	}
}

// signalWait bounds how long a test waits for a signal it expects.
const signalWait = 5 * time.Second

// requireReady waits for TasksReady signals naming exactly the queues in
// want (in any order), then checks that no other signal is queued.
func (n *chanNotifier) requireReady(t *testing.T, want ...string) {
	t.Helper()
	var got []string
	timeout := time.After(signalWait)
	for len(got) < len(want) {
		select {
		case q := <-n.ready:
			got = append(got, q)
		case <-timeout:
			t.Fatalf("TasksReady: got %v within %s, want %v", got, signalWait, want)
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("TasksReady for %v, want %v", got, want)
	}
	n.requireNoReady(t)
}

// requireNoReady checks that no TasksReady signal is queued. The engine
// signals before the call that caused it returns, so there is nothing to
// wait for.
func (n *chanNotifier) requireNoReady(t *testing.T) {
	t.Helper()
	select {
	case q := <-n.ready:
		t.Fatalf("unexpected TasksReady(%q)", q)
	default:
	}
	if n.overflow.Load() {
		t.Fatalf("notifier buffer overflowed")
	}
}

// requireTimers waits for one TimersChanged signal and drains any more
// that the same call sent.
func (n *chanNotifier) requireTimers(t *testing.T, what string) {
	t.Helper()
	select {
	case <-n.timers:
	case <-time.After(signalWait):
		t.Fatalf("no TimersChanged after %s", what)
	}
	for {
		select {
		case <-n.timers:
		default:
			return
		}
	}
}

func (n *chanNotifier) requireNoTimers(t *testing.T, what string) {
	t.Helper()
	select {
	case <-n.timers:
		t.Fatalf("unexpected TimersChanged after %s", what)
	default:
	}
}

func TestNotifierTasksReady(t *testing.T) {
	n := newChanNotifier()
	e := openEngine(t, bolt.Config{Notifier: n})
	T0 := bt.T0

	bt.EnqueueOne(t, e, T0, bt.NewTask("q"))
	n.requireReady(t, "q")
	// The queue already had ready work: no new signal.
	bt.EnqueueOne(t, e, T0, bt.NewTask("q"))
	n.requireNoReady(t)

	// Drained and refilled: a signal again.
	if ls := bt.Lease(t, e, "s1", "q", 10, T0, bt.TTL); len(ls) != 2 {
		t.Fatalf("leased %d, want 2", len(ls))
	}
	n.requireNoReady(t)
	bt.EnqueueOne(t, e, T0, bt.NewTask("q"))
	n.requireReady(t, "q")

	// A released task makes an empty queue ready.
	l := bt.LeaseOne(t, e, "s1", "q", T0)
	if err := e.Release(t.Context(), broker.ReleaseParams{SessionID: "s1", Leases: []broker.LeaseRef{bt.Ref(l)}, Now: T0}); err != nil {
		t.Fatal(err)
	}
	n.requireReady(t, "q")

	// So does a promoted one, and a lapsed lease.
	bt.LeaseOne(t, e, "s1", "q", T0)
	s := bt.NewTask("q")
	s.ProcessAt = T0.Add(time.Minute)
	bt.EnqueueOne(t, e, T0, s)
	n.requireNoReady(t)
	if _, err := e.PromoteDue(t.Context(), T0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	n.requireReady(t, "q")
	bt.LeaseOne(t, e, "s1", "q", T0.Add(time.Minute))
	if _, _, err := e.ReapLeases(t.Context(), T0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	n.requireReady(t, "q")

	// One batch over two new queues signals each once.
	bt.Enqueue(t, e, T0, bt.NewTask("a"), bt.NewTask("b"), bt.NewTask("a"))
	n.requireReady(t, "a", "b")

	// A paused queue stays silent until it is resumed with work.
	if _, err := e.SetQueuePaused(t.Context(), "p", true); err != nil {
		t.Fatal(err)
	}
	bt.EnqueueOne(t, e, T0, bt.NewTask("p"))
	n.requireNoReady(t)
	if _, err := e.SetQueuePaused(t.Context(), "p", false); err != nil {
		t.Fatal(err)
	}
	n.requireReady(t, "p")
	// Resuming a queue with nothing ready says nothing.
	if _, err := e.SetQueuePaused(t.Context(), "empty", false); err != nil {
		t.Fatal(err)
	}
	n.requireNoReady(t)

	// Tasks that cannot run yet never signal.
	g, d := bt.NewTask("w"), bt.NewTask("w")
	g.Group = "g"
	d.DependsOn = []broker.Dependency{{TaskID: l.Task.ID}}
	bt.Enqueue(t, e, T0, g, d)
	n.requireNoReady(t)
}

func TestNotifierTimersChanged(t *testing.T) {
	n := newChanNotifier()
	e := openEngine(t, bolt.Config{Notifier: n})
	T0 := bt.T0
	sched := func(d time.Duration) broker.NewTask {
		nt := bt.NewTask("q")
		nt.ProcessAt = T0.Add(d)
		return nt
	}

	bt.EnqueueOne(t, e, T0, bt.NewTask("q"))
	n.requireNoTimers(t, "enqueueing a pending task")

	bt.EnqueueOne(t, e, T0, sched(10*time.Minute))
	n.requireTimers(t, "the first scheduled task")
	bt.EnqueueOne(t, e, T0, sched(20*time.Minute))
	n.requireNoTimers(t, "a scheduled task later than the first")
	bt.EnqueueOne(t, e, T0, sched(5*time.Minute))
	n.requireTimers(t, "a scheduled task earlier than everything else")

	x := bt.NewTask("q")
	x.ExpiresAt = T0.Add(time.Minute)
	bt.EnqueueOne(t, e, T0, x)
	n.requireTimers(t, "the first expiry")

	l := bt.LeaseOne(t, e, "s1", "q", T0)
	n.requireTimers(t, "the first lease")
	bt.Complete(t, e, "s1", l, outcomeSuccess, "", T0)
	n.requireTimers(t, "the first terminal task (purge time)")

	ls := bt.Lease(t, e, "s1", "q", 1, T0, bt.TTL/2)
	if len(ls) != 1 {
		t.Fatalf("leased %d, want 1", len(ls))
	}
	l = ls[0]
	n.requireTimers(t, "a lease expiring before the other ones")
	bt.Complete(t, e, "s1", l, outcomeRetry, "x", T0)
	n.requireTimers(t, "a retry due before the scheduled tasks")
	if n.overflow.Load() {
		t.Fatalf("notifier buffer overflowed")
	}
}

// TestNotifierLeaseLapsed checks that the reaper reports each lapsed lease,
// with its session and token, to the notifier.
func TestNotifierLeaseLapsed(t *testing.T) {
	t.Parallel()
	n := newChanNotifier()
	e := openEngine(t, bolt.Config{Notifier: n})
	bt.Enqueue(t, e, bt.T0, bt.NewTask("q"))
	ls, err := e.Lease(t.Context(), broker.LeaseParams{SessionID: "s1", Picks: []broker.QueuePick{{Queue: "q", N: 1}}, Now: bt.T0, TTL: bt.TTL})
	if err != nil || len(ls) != 1 {
		t.Fatalf("Lease = %v, %v", ls, err)
	}
	if _, _, err := e.ReapLeases(t.Context(), bt.T0.Add(bt.TTL+time.Second)); err != nil {
		t.Fatal(err)
	}
	select {
	case l := <-n.lapsed:
		if l.SessionID != "s1" || l.Lease.TaskID != ls[0].Task.ID || l.Lease.Token != ls[0].Token {
			t.Fatalf("LeaseLapsed(%+v), want session s1 and the lease %s/%d", l, ls[0].Task.ID, ls[0].Token)
		}
	default:
		t.Fatal("the reaper did not report the lapsed lease")
	}
}
