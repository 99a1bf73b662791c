package brokertest

import (
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
)

// Notes records a broker's signals in buffered channels. It never blocks
// (the engine calls it under its locks); a full buffer is recorded and
// fails the test at the next check.
type Notes struct {
	ready    chan string
	timers   chan struct{}
	lapsed   chan broker.LapsedLease
	crons    chan struct{}
	room     chan Room
	overflow atomic.Bool
	// waiting is what QueueRoom answers: whether anyone still waits.
	waiting atomic.Bool
}

// Room is one QueueRoom signal.
type Room struct {
	Queue string
	Room  int64
}

func newNotes() *Notes {
	return &Notes{ready: make(chan string, 1024), timers: make(chan struct{}, 1024), lapsed: make(chan broker.LapsedLease, 1024),
		crons: make(chan struct{}, 1024), room: make(chan Room, 1024)}
}

// TasksReady records the signal.
func (n *Notes) TasksReady(queue string) {
	select {
	case n.ready <- queue:
	default:
		n.overflow.Store(true)
	}
}

// LeaseLapsed records the signal.
func (n *Notes) LeaseLapsed(l broker.LapsedLease) {
	select {
	case n.lapsed <- l:
	default:
		n.overflow.Store(true)
	}
}

// TimersChanged records the signal.
func (n *Notes) TimersChanged() {
	select {
	case n.timers <- struct{}{}:
	default:
		n.overflow.Store(true)
	}
}

// CronsChanged records the signal.
func (n *Notes) CronsChanged() {
	select {
	case n.crons <- struct{}{}:
	default:
		n.overflow.Store(true)
	}
}

// QueueRoom records the signal, and answers that someone still waits
// only after SetWaiting(true).
func (n *Notes) QueueRoom(queue string, room int64) bool {
	select {
	case n.room <- Room{queue, room}:
	default:
		n.overflow.Store(true)
	}
	return n.waiting.Load()
}

// SetWaiting sets what QueueRoom answers: whether producers still wait
// for room (false, nobody, by default).
func (n *Notes) SetWaiting(w bool) { n.waiting.Store(w) }

// Rooms drains the QueueRoom signals queued so far and returns them, in
// order.
func (n *Notes) Rooms() []Room {
	var out []Room
	for {
		select {
		case r := <-n.room:
			out = append(out, r)
		default:
			return out
		}
	}
}

// CronChanges drains the CronsChanged signals queued so far and counts
// them.
func (n *Notes) CronChanges() int {
	for count := 0; ; count++ {
		select {
		case <-n.crons:
		default:
			return count
		}
	}
}

// signalWait bounds how long a test waits for a signal it expects.
const signalWait = 5 * time.Second

// RequireReady waits for TasksReady signals naming exactly the queues in
// want (in any order), then checks that no other signal is queued.
func (n *Notes) RequireReady(t testing.TB, want ...string) {
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
	n.RequireNoReady(t)
}

// RequireNoReady checks that no TasksReady signal is queued. A broker
// signals before the call that caused it returns, so there is nothing to
// wait for.
func (n *Notes) RequireNoReady(t testing.TB) {
	t.Helper()
	select {
	case q := <-n.ready:
		t.Fatalf("unexpected TasksReady(%q)", q)
	default:
	}
	n.requireNoOverflow(t)
}

// RequireTimers waits for a TimersChanged signal and drains any more that
// the same call sent.
func (n *Notes) RequireTimers(t testing.TB, what string) {
	t.Helper()
	select {
	case <-n.timers:
	case <-time.After(signalWait):
		t.Fatalf("no TimersChanged after %s", what)
	}
	n.DrainTimers()
}

// DrainTimers forgets every TimersChanged signal queued so far.
func (n *Notes) DrainTimers() {
	for {
		select {
		case <-n.timers:
		default:
			return
		}
	}
}

// RequireNoTimers checks that no TimersChanged signal is queued.
func (n *Notes) RequireNoTimers(t testing.TB, what string) {
	t.Helper()
	select {
	case <-n.timers:
		t.Fatalf("unexpected TimersChanged after %s", what)
	default:
	}
	n.requireNoOverflow(t)
}

// Lapsed returns the LeaseLapsed signals queued so far.
func (n *Notes) Lapsed() []broker.LapsedLease {
	var out []broker.LapsedLease
	for {
		select {
		case l := <-n.lapsed:
			out = append(out, l)
		default:
			return out
		}
	}
}

func (n *Notes) requireNoOverflow(t testing.TB) {
	t.Helper()
	if n.overflow.Load() {
		t.Fatal("the notifier's buffer overflowed")
	}
}

func signalCases() []testCase {
	return []testCase{
		{name: "TasksReadyOnEmptyToReady", env: testSignalTasksReady},
		{name: "TimersChangedWhenEarlier", env: testSignalTimers},
		{name: "LeaseLapsedBeforeRedelivery", env: testSignalLeaseLapsed},
		{name: "CronsChangedOnEdits", env: testSignalCrons},
	}
}

// testSignalCrons checks that every operator change to an entry signals
// CronsChanged, and that a fire (which only moves an entry later) does not.
func testSignalCrons(t *testing.T, e *Env) {
	ctx := t.Context()
	b, n := e.B, e.Notes
	steps := []struct {
		what    string
		do      func() error
		signals int
	}{
		{"CreateCron", func() error { _, err := b.CreateCron(ctx, cronEntry("a")); return err }, 1},
		{"FireCron", func() error { _, err := b.FireCron(ctx, fire("a", at(time.Minute), at(2*time.Minute))); return err }, 0},
		{"UpdateCron", func() error { _, err := b.UpdateCron(ctx, "a", replaceCron(cronEntry("a"))); return err }, 1},
		{"UpdateCron (pause)", func() error { _, err := b.UpdateCron(ctx, "a", pauseCron); return err }, 1},
		{"UpdateCron (refused)", func() error {
			_, err := b.UpdateCron(ctx, "a", func(c broker.CronEntry) (broker.CronEntry, error) { return c, broker.ErrInvalidState })
			if errors.Is(err, broker.ErrInvalidState) {
				return nil // the refusal the step expects
			}
			return fmt.Errorf("want update's error, got %w", err)
		}, 0},
		{"DeleteCron", func() error { return b.DeleteCron(ctx, "a") }, 1},
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			t.Fatalf("%s: %v", s.what, err)
		}
		if got := n.CronChanges(); got != s.signals {
			t.Fatalf("%s signalled CronsChanged %d times, want %d", s.what, got, s.signals)
		}
	}
	n.requireNoOverflow(t)
}

func testSignalTasksReady(t *testing.T, e *Env) {
	b, n := e.B, e.Notes
	EnqueueOne(t, b, T0, NewTask("q"))
	n.RequireReady(t, "q")
	// The queue already had ready work: no new signal.
	EnqueueOne(t, b, T0, NewTask("q"))
	n.RequireNoReady(t)

	// Drained and refilled: a signal again.
	if ls := Lease(t, b, "s1", "q", 10, T0, TTL); len(ls) != 2 {
		t.Fatalf("leased %d, want 2", len(ls))
	}
	n.RequireNoReady(t)
	EnqueueOne(t, b, T0, NewTask("q"))
	n.RequireReady(t, "q")

	// A released task makes an empty queue ready.
	l := LeaseOne(t, b, "s1", "q", T0)
	if err := b.Release(t.Context(), broker.ReleaseParams{SessionID: "s1", Leases: []broker.LeaseRef{Ref(l)}, Now: T0}); err != nil {
		t.Fatal(err)
	}
	n.RequireReady(t, "q")

	// So does a promoted one, and a reclaimed lease.
	LeaseOne(t, b, "s1", "q", T0)
	s := NewTask("q")
	s.ProcessAt = T0.Add(time.Minute)
	EnqueueOne(t, b, T0, s)
	n.RequireNoReady(t)
	if _, err := b.PromoteDue(t.Context(), T0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	n.RequireReady(t, "q")
	LeaseOne(t, b, "s1", "q", T0.Add(time.Minute))
	Reap(t, b, T0.Add(time.Hour))
	n.RequireReady(t, "q")

	// One batch over two new queues signals each once.
	Enqueue(t, b, T0, NewTask("a"), NewTask("b"), NewTask("a"))
	n.RequireReady(t, "a", "b")

	// A paused queue stays silent until it is resumed with work.
	if _, err := b.SetQueuePaused(t.Context(), "p", true); err != nil {
		t.Fatal(err)
	}
	EnqueueOne(t, b, T0, NewTask("p"))
	n.RequireNoReady(t)
	if _, err := b.SetQueuePaused(t.Context(), "p", false); err != nil {
		t.Fatal(err)
	}
	n.RequireReady(t, "p")
	// Resuming a queue with nothing ready says nothing.
	if _, err := b.SetQueuePaused(t.Context(), "empty", false); err != nil {
		t.Fatal(err)
	}
	n.RequireNoReady(t)
}

func testSignalTimers(t *testing.T, e *Env) {
	b, n := e.B, e.Notes
	sched := func(d time.Duration) broker.NewTask {
		nt := NewTask("q")
		nt.ProcessAt = T0.Add(d)
		return nt
	}
	EnqueueOne(t, b, T0, NewTask("q"))
	n.RequireNoTimers(t, "enqueueing a pending task")

	EnqueueOne(t, b, T0, sched(10*time.Minute))
	n.RequireTimers(t, "the first scheduled task")
	EnqueueOne(t, b, T0, sched(20*time.Minute))
	n.RequireNoTimers(t, "a scheduled task later than the first")
	EnqueueOne(t, b, T0, sched(5*time.Minute))
	n.RequireTimers(t, "a scheduled task earlier than everything else")

	x := NewTask("q")
	x.ExpiresAt = T0.Add(time.Minute)
	EnqueueOne(t, b, T0, x)
	n.RequireTimers(t, "the first expiry")

	l := LeaseOne(t, b, "s1", "q", T0)
	n.RequireTimers(t, "the first lease")
	Succeed(t, b, "s1", l, T0)
	n.RequireTimers(t, "the first terminal task (purging)")

	ls := Lease(t, b, "s1", "q", 1, T0, TTL/2)
	if len(ls) != 1 {
		t.Fatalf("leased %d, want 1", len(ls))
	}
	n.RequireTimers(t, "a lease expiring before the other ones")
	Fail(t, b, "s1", ls[0], "x", T0, T0.Add(time.Second))
	n.RequireTimers(t, "a retry due before the scheduled tasks")

	EnqueueOne(t, b, T0, NewTask("q"))
	n.DrainTimers()
	l = LeaseOne(t, b, "s1", "q", T0)
	n.DrainTimers()
	extend := func(now time.Time) {
		t.Helper()
		if got, err := b.Extend(t.Context(), broker.ExtendParams{SessionID: "s1", Leases: []broker.LeaseRef{Ref(l)}, Now: now, TTL: TTL}); err != nil || got != 1 {
			t.Fatalf("Extend at %s = %d, %v", now, got, err)
		}
	}
	extend(T0.Add(time.Second))
	n.RequireNoTimers(t, "a renewal that moves the lease later")
	extend(T0.Add(-time.Hour))
	n.RequireTimers(t, "a renewal by a clock moved back, which moves the earliest lease expiry earlier")
	n.requireNoOverflow(t)
}

// testSignalLeaseLapsed checks that reclaiming a lease tells its session,
// with the lease's token, before the task can be leased again.
func testSignalLeaseLapsed(t *testing.T, e *Env) {
	b, n := e.B, e.Notes
	task := EnqueueOne(t, b, T0, NewTask("q"))
	l := LeaseOne(t, b, "s1", "q", T0)
	if got := n.Lapsed(); len(got) != 0 {
		t.Fatalf("LeaseLapsed before any lapse: %v", got)
	}
	lapsed, _, err := b.LapsedLeases(t.Context(), T0.Add(TTL))
	if err != nil || len(lapsed) != 1 {
		t.Fatalf("LapsedLeases = %v, %v", lapsed, err)
	}
	if got := n.Lapsed(); len(got) != 0 {
		t.Fatalf("LapsedLeases alone signaled %v: only a reclaim does", got)
	}
	if err := b.Reclaim(t.Context(), []broker.Decision{broker.Retrying("s1", Ref(l), T0.Add(TTL), T0.Add(TTL), "lapsed")}); err != nil {
		t.Fatal(err)
	}
	got := n.Lapsed()
	if len(got) != 1 || got[0].SessionID != "s1" || got[0].Lease != Ref(l) || got[0].To != pending {
		t.Fatalf("LeaseLapsed signals %+v, want one for s1's lease %s/%d, the task left PENDING", got, l.Task.ID, l.Token)
	}
	// Only now may the task go out again.
	l2 := LeaseOne(t, b, "s2", "q", T0.Add(TTL))
	if l2.Task.ID != task.ID || l2.Task.Retried != 1 {
		t.Fatalf("redelivery %s retried %d", l2.Task.ID, l2.Task.Retried)
	}
	// The signal names the state the decision left the task in.
	at2 := T0.Add(2 * TTL)
	if err := b.Reclaim(t.Context(), []broker.Decision{broker.Archived("s2", Ref(l2), at2, "lapsed again")}); err != nil {
		t.Fatal(err)
	}
	if got := n.Lapsed(); len(got) != 1 || got[0].SessionID != "s2" || got[0].To != archived {
		t.Fatalf("LeaseLapsed signals %+v, want one for s2 with the task ARCHIVED", got)
	}
}
