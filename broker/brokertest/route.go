package brokertest

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
)

// routeCases cover Route (which tasks a lease may take) and
// StartAuthorizer (at-most-once tasks).
func routeCases() []testCase {
	return []testCase{
		{name: "ByType", fn: testRouteByType},
		{name: "PassedOverKeepOrder", fn: testRoutePassedOverKeepOrder},
		{name: "Except", fn: testRouteExcept},
		{name: "PassedOverSignal", env: testRoutePassedOverSignal},
		{name: "GroupFiredBesidePassedOver", env: testRouteGroupFired},
		{name: "AtMostOnceNeedsAuthorization", fn: testRouteAtMostOnce},
		{name: "AuthorizedThenReleased", fn: testStartReleased},
		{name: "AuthorizedThenLapsed", fn: testStartLapsed},
		{name: "AuthorizedThenVerdict", fn: testStartVerdict},
		{name: "UnauthorizedReleased", fn: testStartUnauthorizedReleased},
		{name: "StaleStart", fn: testStartStale},
		{name: "CanceledBeforeStart", fn: testStartCanceled},
		{name: "AcrossRestart", env: testStartRestart},
		{name: "PushInterruptedByRestart", env: testPushRestart},
		{name: "WaitingKinds", fn: testWaitingKinds},
	}
}

// leaseRouted leases up to n tasks of queue to session through r.
func leaseRouted(tb testing.TB, b broker.Broker, session, queue string, n int, now time.Time, r broker.Route) []broker.Lease {
	tb.Helper()
	ls, err := b.Lease(tb.Context(), broker.LeaseParams{
		SessionID: session, Picks: []broker.QueuePick{{Queue: queue, N: n}}, Now: now, TTL: TTL, Route: r,
	})
	if err != nil {
		tb.Fatalf("Lease %s from %q routed %+v: %v", session, queue, r, err)
	}
	return ls
}

// typed returns a task of queue and typ.
func typed(queue, typ string) broker.NewTask {
	nt := NewTask(queue)
	nt.Type = typ
	return nt
}

// atMostOnce returns an at-most-once task of queue.
func atMostOnce(queue string) broker.NewTask {
	nt := NewTask(queue)
	nt.AtMostOnce = true
	return nt
}

// all is the route of a session that takes everything.
var all = broker.Route{StartAuthorization: true}

func leasedIDs(ls []broker.Lease) []string {
	ids := make([]string, len(ls))
	for i, l := range ls {
		ids[i] = l.Task.ID
	}
	return ids
}

func authorize(tb testing.TB, b broker.Broker, session string, l broker.Lease, now time.Time) error {
	tb.Helper()
	a, ok := b.(broker.StartAuthorizer)
	if !ok {
		tb.Fatalf("%T does not implement broker.StartAuthorizer", b)
	}
	return a.AuthorizeStart(tb.Context(), broker.StartParams{SessionID: session, Lease: Ref(l), Now: now})
}

// testRouteByType: a lease takes only the types its route names; a
// route with nil Types takes every type.
func testRouteByType(t *testing.T, b broker.Broker) {
	a1 := EnqueueOne(t, b, T0, typed("q", "a")).ID
	b1 := EnqueueOne(t, b, T0, typed("q", "b")).ID
	a2 := EnqueueOne(t, b, T0, typed("q", "a")).ID
	c1 := EnqueueOne(t, b, T0, typed("q", "c")).ID

	if got := leasedIDs(leaseRouted(t, b, "sb", "q", 10, T0, broker.Route{Types: []string{"b"}})); !slices.Equal(got, []string{b1}) {
		t.Fatalf("a lease of type b got %v, want only %s", got, b1)
	}
	if got := leasedIDs(leaseRouted(t, b, "sa", "q", 10, T0, broker.Route{Types: []string{"a", "x"}})); !slices.Equal(got, []string{a1, a2}) {
		t.Fatalf("a lease of types a, x got %v, want %v in order", got, []string{a1, a2})
	}
	if got := leaseRouted(t, b, "sb", "q", 10, T0, broker.Route{Types: []string{"b"}}); len(got) != 0 {
		t.Fatalf("a second lease of type b got %v, want nothing", leasedIDs(got))
	}
	RequireState(t, b, c1, broker.StatePending)
	if got := leasedIDs(leaseRouted(t, b, "s", "q", 10, T0, broker.Route{})); !slices.Equal(got, []string{c1}) {
		t.Fatalf("an untyped lease got %v, want %s", got, c1)
	}
}

// testRoutePassedOverKeepOrder: tasks a routed lease passed over keep
// their place (priority, then FIFO) for the leases that can take them.
func testRoutePassedOverKeepOrder(t *testing.T, b broker.Broker) {
	var want []string
	for i := range 6 {
		nt := typed("q", "a")
		if i%2 == 1 {
			nt.Type = "b"
		}
		if i == 4 {
			nt.Priority = 9
		}
		id := EnqueueOne(t, b, T0, nt).ID
		if nt.Type == "a" {
			want = append(want, id)
		}
	}
	want = append([]string{want[2]}, want[:2]...) // the priority-9 task first
	// A lease of type b passes over every a; then more a's arrive.
	if got := leaseRouted(t, b, "sb", "q", 1, T0, broker.Route{Types: []string{"b"}}); len(got) != 1 || got[0].Task.Type != "b" {
		t.Fatalf("a lease of type b got %v", leasedIDs(got))
	}
	later := EnqueueOne(t, b, T0, typed("q", "a")).ID
	want = append(want, later)
	got := leasedIDs(leaseRouted(t, b, "s", "q", 10, T0, broker.Route{Types: []string{"a"}}))
	if !slices.Equal(got, want) {
		t.Fatalf("the a's were leased in the order %v, want %v (priority, then FIFO)", got, want)
	}
	if n := len(leaseRouted(t, b, "s", "q", 10, T0, broker.Route{})); n != 2 {
		t.Fatalf("an untyped lease got %d tasks, want the 2 b's left", n)
	}
}

// testRouteExcept: a route's Except passes over the types it names.
func testRouteExcept(t *testing.T, b broker.Broker) {
	EnqueueOne(t, b, T0, typed("q", "a"))
	bid := EnqueueOne(t, b, T0, typed("q", "b")).ID
	if got := leasedIDs(leaseRouted(t, b, "s", "q", 10, T0, broker.Route{Except: []string{"a"}})); !slices.Equal(got, []string{bid}) {
		t.Fatalf("a lease except a got %v, want %s", got, bid)
	}
	if got := leaseRouted(t, b, "s", "q", 10, T0, broker.Route{Types: []string{"a"}, Except: []string{"a"}}); len(got) != 0 {
		t.Fatalf("a lease of a except a got %v", leasedIDs(got))
	}
}

// testRoutePassedOverSignal: while a queue holds ready tasks a lease
// passed over, a task that becomes ready signals TasksReady although the
// queue's ready count never went back to 0, so that a session waiting for
// its own types hears of it.
func testRoutePassedOverSignal(t *testing.T, e *Env) {
	b := e.B
	EnqueueOne(t, b, T0, typed("q", "a"))
	e.Notes.RequireReady(t, "q")
	if got := leaseRouted(t, b, "sb", "q", 1, T0, broker.Route{Types: []string{"b"}}); len(got) != 0 {
		t.Fatalf("a lease of type b got %v", leasedIDs(got))
	}
	EnqueueOne(t, b, T0, typed("q", "b"))
	e.Notes.RequireReady(t, "q")
	if got := leaseRouted(t, b, "sb", "q", 1, T0, broker.Route{Types: []string{"b"}}); len(got) != 1 {
		t.Fatalf("the signaled lease of type b got %d tasks, want 1", len(got))
	}
}

// testRouteAtMostOnce: an at-most-once task goes only to a route with
// StartAuthorization, and says so.
func testRouteAtMostOnce(t *testing.T, b broker.Broker) {
	id := EnqueueOne(t, b, T0, atMostOnce("q")).ID
	if !GetTask(t, b, id).AtMostOnce {
		t.Fatal("GetTask of an at-most-once task: AtMostOnce unset")
	}
	plain := EnqueueOne(t, b, T0, NewTask("q")).ID
	if got := leasedIDs(leaseRouted(t, b, "s", "q", 10, T0, broker.Route{})); !slices.Equal(got, []string{plain}) {
		t.Fatalf("a lease without start authorization got %v, want only %s", got, plain)
	}
	ls := leaseRouted(t, b, "s2", "q", 10, T0, all)
	if len(ls) != 1 || ls[0].Task.ID != id || !ls[0].Task.AtMostOnce {
		t.Fatalf("a lease with start authorization got %v, want %s marked at most once", leasedIDs(ls), id)
	}
}

// leaseAuthorized enqueues an at-most-once task, leases it to session
// "s" and authorizes its start.
func leaseAuthorized(t *testing.T, b broker.Broker, nt broker.NewTask) broker.Lease {
	t.Helper()
	nt.AtMostOnce = true
	id := EnqueueOne(t, b, T0, nt).ID
	ls := leaseRouted(t, b, "s", nt.Queue, 1, T0, all)
	if len(ls) != 1 || ls[0].Task.ID != id {
		t.Fatalf("lease of the at-most-once task got %v", leasedIDs(ls))
	}
	if err := authorize(t, b, "s", ls[0], T0); err != nil {
		t.Fatalf("AuthorizeStart: %v", err)
	}
	return ls[0]
}

func requireOutcomeUnknown(t *testing.T, b broker.Broker, id, why string, retried int32) {
	t.Helper()
	task := RequireState(t, b, id, broker.StateArchived)
	if task.LastError != broker.OutcomeUnknownPrefix+why {
		t.Fatalf("last_error %q, want %q", task.LastError, broker.OutcomeUnknownPrefix+why)
	}
	if task.Retried != retried {
		t.Fatalf("retried %d, want %d", task.Retried, retried)
	}
}

// testStartReleased: an authorized attempt handed back (its session
// ended, or the worker answered RELEASED) is archived, never rerun.
func testStartReleased(t *testing.T, b broker.Broker) {
	l := leaseAuthorized(t, b, NewTask("q"))
	if err := b.Release(t.Context(), broker.ReleaseParams{SessionID: "s", Leases: []broker.LeaseRef{Ref(l)}, Now: T0}); err != nil {
		t.Fatal(err)
	}
	requireOutcomeUnknown(t, b, l.Task.ID, broker.UnknownReleased, 0)
	if got := leaseRouted(t, b, "s", "q", 10, T0, all); len(got) != 0 {
		t.Fatalf("the released at-most-once task was leased again: %v", leasedIDs(got))
	}

	l = leaseAuthorized(t, b, NewTask("q2"))
	if st := Decide(t, b, broker.Released("s", Ref(l), T0)); st != broker.StateArchived {
		t.Fatalf("RELEASED after the start: state %v, want ARCHIVED", st)
	}
	requireOutcomeUnknown(t, b, l.Task.ID, broker.UnknownReleased, 0)
}

// testStartLapsed: an authorized attempt whose lease lapses is reported
// so, and the reaper's decision archives it.
func testStartLapsed(t *testing.T, b broker.Broker) {
	l := leaseAuthorized(t, b, NewTask("q"))
	lapsed := Reap(t, b, T0.Add(TTL))
	if len(lapsed) != 1 || !lapsed[0].StartAuthorized {
		t.Fatalf("lapsed %+v, want the lease with StartAuthorized", lapsed)
	}
	requireOutcomeUnknown(t, b, l.Task.ID, broker.UnknownLapsed, 0)
}

// testStartVerdict: a worker's verdict on an authorized attempt stands;
// the next attempt starts unauthorized.
func testStartVerdict(t *testing.T, b broker.Broker) {
	l := leaseAuthorized(t, b, NewTask("q"))
	if st := Succeed(t, b, "s", l, T0); st != broker.StateCompleted {
		t.Fatalf("success after the start: %v", st)
	}
	l = leaseAuthorized(t, b, NewTask("q"))
	if st := Fail(t, b, "s", l, "boom", T0, T0); st != broker.StatePending && st != broker.StateRetry {
		t.Fatalf("a failure after the start: %v, want it retried", st)
	}
	again := leaseRouted(t, b, "s", "q", 1, T0.Add(time.Second), all)
	if len(again) != 1 || again[0].Task.ID != l.Task.ID {
		t.Fatalf("the retried task was not leased again: %v", leasedIDs(again))
	}
	if err := b.Release(t.Context(), broker.ReleaseParams{SessionID: "s", Leases: []broker.LeaseRef{Ref(again[0])}, Now: T0}); err != nil {
		t.Fatal(err)
	}
	RequireState(t, b, l.Task.ID, broker.StatePending)
}

// testStartUnauthorizedReleased: before its start is authorized, an
// at-most-once attempt is released or lapses as any other.
func testStartUnauthorizedReleased(t *testing.T, b broker.Broker) {
	id := EnqueueOne(t, b, T0, atMostOnce("q")).ID
	l := leaseRouted(t, b, "s", "q", 1, T0, all)[0]
	if err := b.Release(t.Context(), broker.ReleaseParams{SessionID: "s", Leases: []broker.LeaseRef{Ref(l)}, Now: T0}); err != nil {
		t.Fatal(err)
	}
	if task := RequireState(t, b, id, broker.StatePending); task.Retried != 0 {
		t.Fatalf("retried %d after a release", task.Retried)
	}
	leaseRouted(t, b, "s", "q", 1, T0, all)
	lapsed := Reap(t, b, T0.Add(TTL))
	if len(lapsed) != 1 || lapsed[0].StartAuthorized {
		t.Fatalf("lapsed %+v, want one lease without StartAuthorized", lapsed)
	}
	if task := GetTask(t, b, id); task.State == broker.StateArchived {
		t.Fatalf("an unauthorized lapse archived the task: %q", task.LastError)
	}
}

// testStartStale: a start is refused for a lease that is not current.
func testStartStale(t *testing.T, b broker.Broker) {
	EnqueueOne(t, b, T0, atMostOnce("q"))
	l := leaseRouted(t, b, "s", "q", 1, T0, all)[0]
	Reap(t, b, T0.Add(TTL))
	requireErrIs(t, "AuthorizeStart of a lapsed lease", authorize(t, b, "s", l, T0.Add(TTL)), broker.ErrLeaseLost)
	l2 := leaseRouted(t, b, "s2", "q", 1, T0.Add(TTL), all)[0]
	requireErrIs(t, "AuthorizeStart of the old attempt", authorize(t, b, "s", l, T0.Add(TTL)), broker.ErrLeaseLost)
	requireErrIs(t, "AuthorizeStart from another session", authorize(t, b, "s", l2, T0.Add(TTL)), broker.ErrLeaseLost)
	if err := authorize(t, b, "s2", l2, T0.Add(TTL)); err != nil {
		t.Fatalf("AuthorizeStart of the current attempt: %v", err)
	}
	unknown := broker.Lease{Task: &broker.Task{ID: NewID()}, Token: 1}
	requireErrIs(t, "AuthorizeStart of an unknown task", authorize(t, b, "s2", unknown, T0), broker.ErrLeaseLost)
}

// testStartCanceled: a start is refused for a task canceled while it
// waited to start, which then ends CANCELED.
func testStartCanceled(t *testing.T, b broker.Broker) {
	id := EnqueueOne(t, b, T0, atMostOnce("q")).ID
	l := leaseRouted(t, b, "s", "q", 1, T0, all)[0]
	if _, err := b.Act(t.Context(), broker.ActParams{Action: broker.ActionCancel, IDs: []string{id}, Now: T0}); err != nil {
		t.Fatal(err)
	}
	err := authorize(t, b, "s", l, T0)
	if !errors.Is(err, broker.ErrInvalidState) || !strings.Contains(err.Error(), "cancel") {
		t.Fatalf("AuthorizeStart of a canceled task: %v, want ErrInvalidState saying it was canceled", err)
	}
	if err := b.Release(t.Context(), broker.ReleaseParams{SessionID: "s", Leases: []broker.LeaseRef{Ref(l)}, Now: T0}); err != nil {
		t.Fatal(err)
	}
	RequireState(t, b, id, broker.StateCanceled)
}

// testStartRestart: an authorized attempt running when the server stops
// is archived at the restart; an unauthorized one is pending again, and
// still at most once.
func testStartRestart(t *testing.T, e *Env) {
	b := e.B
	started := leaseAuthorized(t, b, NewTask("q")).Task.ID
	waiting := EnqueueOne(t, b, T0, atMostOnce("w")).ID
	if ls := leaseRouted(t, b, "s", "w", 1, T0, all); len(ls) != 1 {
		t.Fatalf("leased %v", leasedIDs(ls))
	}
	b = e.Reopen()
	requireOutcomeUnknown(t, b, started, broker.UnknownRestart, 0)
	if task := RequireState(t, b, waiting, broker.StatePending); !task.AtMostOnce {
		t.Fatal("AtMostOnce lost across the restart")
	}
	if got := leaseRouted(t, b, "s", "w", 1, T0, broker.Route{}); len(got) != 0 {
		t.Fatalf("a lease without start authorization got %v after the restart", leasedIDs(got))
	}
	if got := leaseRouted(t, b, "s", "w", 1, T0, all); len(got) != 1 {
		t.Fatalf("a lease with start authorization got %d after the restart", len(got))
	}
}

// testWaitingKinds: the kinds a routed lease passed over are listed while
// they wait, and no longer once taken.
func testWaitingKinds(t *testing.T, b broker.Broker) {
	kl, ok := b.(broker.KindLister)
	if !ok {
		t.Fatalf("%T does not implement broker.KindLister", b)
	}
	kinds := func() []broker.Kind {
		t.Helper()
		ks, err := kl.WaitingKinds(t.Context(), "q")
		if err != nil {
			t.Fatal(err)
		}
		return ks
	}
	EnqueueOne(t, b, T0, typed("q", "a"))
	EnqueueOne(t, b, T0, atMostOnce("q"))
	if got := leaseRouted(t, b, "s", "q", 5, T0, broker.Route{Types: []string{"b"}}); len(got) != 0 {
		t.Fatalf("a lease of type b got %v", leasedIDs(got))
	}
	got := kinds()
	for _, want := range []broker.Kind{{Type: "a"}, {Type: "test", AtMostOnce: true}} {
		if !slices.Contains(got, want) {
			t.Fatalf("WaitingKinds = %v, want it to hold %v", got, want)
		}
	}
	if !slices.IsSortedFunc(got, func(x, y broker.Kind) int {
		if c := strings.Compare(x.Type, y.Type); c != 0 {
			return c
		}
		if x.AtMostOnce == y.AtMostOnce {
			return 0
		}
		if !x.AtMostOnce {
			return -1
		}
		return 1
	}) {
		t.Fatalf("WaitingKinds = %v, not sorted", got)
	}
	if n := len(leaseRouted(t, b, "s", "q", 5, T0, all)); n != 2 {
		t.Fatalf("an open lease got %d, want 2", n)
	}
	if got := kinds(); len(got) != 0 {
		t.Fatalf("WaitingKinds = %v once everything was leased, want none", got)
	}
}

// testRouteGroupFired: a group that fires while the queue holds ready
// tasks that a routed lease passed over signals TasksReady: the sessions
// of its batch type may be idle, the ready tasks not being theirs.
func testRouteGroupFired(t *testing.T, e *Env) {
	b := e.B
	setConfig(t, b, "q", broker.QueueConfig{Group: broker.GroupPolicy{MaxSize: 2, MaxDelay: time.Hour, GracePeriod: time.Hour}})
	EnqueueOne(t, b, T0, typed("q", "a"))
	if got := leaseRouted(t, b, "s", "q", 1, T0, broker.Route{Types: []string{"sum"}}); len(got) != 0 {
		t.Fatalf("a lease of type sum got %v", leasedIDs(got))
	}
	drainReady(e.Notes)
	EnqueueOne(t, b, T0, grouped("q", "g", "sum"))
	EnqueueOne(t, b, T0, grouped("q", "g", "sum"))
	if n := readyGroups(b, "q", "sum"); n != 1 {
		t.Fatalf("ReadyGroups = %d, want the group fired", n)
	}
	e.Notes.RequireReady(t, "q")
}
