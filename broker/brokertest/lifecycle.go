package brokertest

import (
	"strings"
	"testing"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
)

func lifecycleCases() []testCase {
	return []testCase{
		{name: "ExtendCurrentOnly", fn: testExtend},
		{name: "ReapLapsed", fn: testReap},
		{name: "ReapExhausted", fn: testReapExhausted},
		{name: "Release", fn: testRelease},
		{name: "Progress", fn: testProgress},
		{name: "ReclaimFenced", fn: testReclaimFenced},
	}
}

func testExtend(t *testing.T, b broker.Broker) {
	for range 4 {
		EnqueueOne(t, b, T0, NewTask("q"))
	}
	ls := Lease(t, b, "s1", "q", 3, T0, 30*time.Second)
	ols := Lease(t, b, "s2", "q", 1, T0, 30*time.Second)
	if len(ls) != 3 || len(ols) != 1 {
		t.Fatalf("leased %d and %d, want 3 and 1", len(ls), len(ols))
	}
	other := ols[0]
	a, bb, c := ls[0], ls[1], ls[2]

	stale := Ref(bb)
	stale.Token++
	n, err := b.Extend(t.Context(), broker.ExtendParams{
		SessionID: "s1",
		Leases:    []broker.LeaseRef{Ref(a), stale, Ref(other), {TaskID: NewID(), Token: a.Token}, {TaskID: "bad", Token: 1}},
		Now:       at(20 * time.Second),
		TTL:       30 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Fatalf("Extend extended %d leases, want 1 (only the current one of s1)", n)
	}

	lapsed := Reap(t, b, at(30*time.Second))
	got := map[string]broker.LapsedLease{}
	for _, ll := range lapsed {
		got[ll.Lease.TaskID] = ll
	}
	want := map[string]broker.LapsedLease{
		bb.Task.ID:    {SessionID: "s1", Lease: Ref(bb), Expiry: at(30 * time.Second), MaxRetry: 25},
		c.Task.ID:     {SessionID: "s1", Lease: Ref(c), Expiry: at(30 * time.Second), MaxRetry: 25},
		other.Task.ID: {SessionID: "s2", Lease: Ref(other), Expiry: at(30 * time.Second), MaxRetry: 25},
	}
	if len(lapsed) != len(want) {
		t.Fatalf("LapsedLeases %v, want %v", lapsed, want)
	}
	for id, w := range want {
		if g := got[id]; g.SessionID != w.SessionID || g.Lease != w.Lease || !g.Expiry.Equal(w.Expiry) || g.MaxRetry != w.MaxRetry || g.Limited {
			t.Fatalf("lapsed lease of %s = %+v, want %+v", id, g, w)
		}
	}
	_, next, err := b.LapsedLeases(t.Context(), at(30*time.Second))
	if err != nil || !next.Equal(at(50*time.Second)) {
		t.Fatalf("LapsedLeases next = %v, %v; want the extended expiry %v", next, err, at(50*time.Second))
	}
	RequireState(t, b, a.Task.ID, active)
	if st := Succeed(t, b, "s1", a, at(45*time.Second)); st != completed {
		t.Fatalf("Complete of the extended lease gave %s", st)
	}
	lapsed, next, err = b.LapsedLeases(t.Context(), at(time.Hour))
	if err != nil || len(lapsed) != 0 || !next.IsZero() {
		t.Fatalf("LapsedLeases with no leases = %v, %v, %v", lapsed, next, err)
	}
	RequireCounts(t, b, "q", Counts{pending: 3, completed: 1})
}

func testReap(t *testing.T, b broker.Broker) {
	nt := NewTask("q")
	nt.MaxRetry = 3
	task := EnqueueOne(t, b, T0, nt)
	ls := Lease(t, b, "s1", "q", 1, T0, 30*time.Second)
	old := ls[0]

	lapsed, next, err := b.LapsedLeases(t.Context(), at(29*time.Second))
	if err != nil || len(lapsed) != 0 {
		t.Fatalf("LapsedLeases before expiry = %v, %v", lapsed, err)
	}
	if !next.Equal(at(30 * time.Second)) {
		t.Fatalf("LapsedLeases next = %v, want %v", next, at(30*time.Second))
	}
	RequireState(t, b, task.ID, active)

	lapsed = Reap(t, b, at(30*time.Second))
	if len(lapsed) != 1 || lapsed[0].SessionID != "s1" || lapsed[0].Lease != Ref(old) || lapsed[0].MaxRetry != 3 {
		t.Fatalf("LapsedLeases %+v, want s1's lease of %s", lapsed, task.ID)
	}
	got := RequireState(t, b, task.ID, pending)
	if got.Retried != 1 {
		t.Fatalf("Retried = %d after a lapsed lease, want 1", got.Retried)
	}
	if n := Ready(b, "q"); n != 1 {
		t.Fatalf("Ready = %d after reaping, want 1", n)
	}

	// The old lease is dead for every operation.
	_, err = b.Complete(t.Context(), broker.Completed("s1", Ref(old), at(31*time.Second), nil))
	requireErrIs(t, "Complete with a reaped lease", err, broker.ErrLeaseLost)
	err = b.Progress(t.Context(), broker.ProgressParams{SessionID: "s1", Lease: Ref(old), Percent: 50})
	requireErrIs(t, "Progress with a reaped lease", err, broker.ErrLeaseLost)
	if n, err := b.Extend(t.Context(), broker.ExtendParams{SessionID: "s1", Leases: []broker.LeaseRef{Ref(old)}, Now: at(31 * time.Second), TTL: TTL}); err != nil || n != 0 {
		t.Fatalf("Extend of a reaped lease = %d, %v", n, err)
	}
	RequireState(t, b, task.ID, pending)

	// Redelivered, possibly to another session, with a fresh token.
	l := LeaseOne(t, b, "s2", "q", at(32*time.Second))
	if l.Task.ID != task.ID || l.Token == old.Token || l.Task.Retried != 1 {
		t.Fatalf("redelivery = %+v (token %d), want task %s with a new token and retried 1", l.Task, l.Token, task.ID)
	}
	_, err = b.Complete(t.Context(), broker.Completed("s1", Ref(old), at(33*time.Second), nil))
	requireErrIs(t, "late Complete of the first attempt", err, broker.ErrLeaseLost)
	RequireState(t, b, task.ID, active)
	Succeed(t, b, "s2", l, at(34*time.Second))
	RequireState(t, b, task.ID, completed)
}

func testReapExhausted(t *testing.T, b broker.Broker) {
	none, one := NewTask("none"), NewTask("one")
	none.MaxRetry, one.MaxRetry = 0, 1
	tn := EnqueueOne(t, b, T0, none)
	to := EnqueueOne(t, b, T0, one)

	LeaseOne(t, b, "s1", "none", T0)
	LeaseOne(t, b, "s1", "one", T0)
	if lapsed := Reap(t, b, at(TTL)); len(lapsed) != 2 {
		t.Fatalf("Reap = %v; want 2 lapsed", lapsed)
	}
	if got := RequireState(t, b, tn.ID, archived); got.LastError == "" {
		t.Fatalf("archived by the reaper without a last error")
	}
	if got := RequireState(t, b, to.ID, pending); got.Retried != 1 {
		t.Fatalf("Retried = %d, want 1", got.Retried)
	}

	LeaseOne(t, b, "s1", "one", at(2*TTL))
	if lapsed := Reap(t, b, at(3*TTL)); len(lapsed) != 1 {
		t.Fatalf("Reap = %v; want 1 lapsed", lapsed)
	}
	RequireState(t, b, to.ID, archived)
	RequireCounts(t, b, "none", Counts{archived: 1})
	RequireCounts(t, b, "one", Counts{archived: 1})
	if n := Ready(b, "one"); n != 0 {
		t.Fatalf("Ready = %d, want 0", n)
	}
}

func testRelease(t *testing.T, b broker.Broker) {
	for range 3 {
		EnqueueOne(t, b, T0, NewTask("q"))
	}
	ls := Lease(t, b, "s1", "q", 3, T0, TTL)
	if len(ls) != 3 {
		t.Fatalf("leased %d, want 3", len(ls))
	}
	a, bb, c := ls[0], ls[1], ls[2]
	stale := Ref(bb)
	stale.Token += 1000
	err := b.Release(t.Context(), broker.ReleaseParams{SessionID: "s1", Leases: []broker.LeaseRef{Ref(a), stale, {TaskID: NewID(), Token: 1}}, Now: at(time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	err = b.Release(t.Context(), broker.ReleaseParams{SessionID: "s2", Leases: []broker.LeaseRef{Ref(c)}, Now: at(time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	if got := RequireState(t, b, a.Task.ID, pending); got.Retried != 0 {
		t.Fatalf("Retried = %d after Release, want 0", got.Retried)
	}
	RequireState(t, b, bb.Task.ID, active)
	RequireState(t, b, c.Task.ID, active)
	if n := Ready(b, "q"); n != 1 {
		t.Fatalf("Ready = %d after releasing one, want 1", n)
	}
	_, err = b.Complete(t.Context(), broker.Completed("s1", Ref(a), at(2*time.Second), nil))
	requireErrIs(t, "Complete of a released lease", err, broker.ErrLeaseLost)
	// Releasing again is a no-op.
	if err := b.Release(t.Context(), broker.ReleaseParams{SessionID: "s1", Leases: []broker.LeaseRef{Ref(a)}, Now: at(2 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	RequireCounts(t, b, "q", Counts{pending: 1, active: 2})

	if err := b.Release(t.Context(), broker.ReleaseParams{SessionID: "s1", Leases: []broker.LeaseRef{Ref(bb), Ref(c)}, Now: at(3 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	RequireCounts(t, b, "q", Counts{pending: 3})
	for _, l := range Lease(t, b, "s3", "q", 10, at(4*time.Second), TTL) {
		if l.Task.Retried != 0 {
			t.Fatalf("released task %s redelivered with retried %d", l.Task.ID, l.Task.Retried)
		}
	}
	// A released lease's expiry does not count against the task.
	if lapsed := Reap(t, b, at(time.Hour)); len(lapsed) != 3 {
		t.Fatalf("Reap = %v; want only the 3 current leases", lapsed)
	}
	for _, l := range ls {
		if got := GetTask(t, b, l.Task.ID); got.Retried != 1 {
			t.Fatalf("Retried = %d, want 1 (one lapsed lease, releases free)", got.Retried)
		}
	}
}

func testProgress(t *testing.T, b broker.Broker) {
	task := EnqueueOne(t, b, T0, NewTask("q"))
	l := LeaseOne(t, b, "s1", "q", T0)
	for _, p := range []struct {
		pct int32
		msg string
	}{{40, "resizing"}, {75, "uploading"}} {
		if err := b.Progress(t.Context(), broker.ProgressParams{SessionID: "s1", Lease: Ref(l), Percent: p.pct, Message: p.msg}); err != nil {
			t.Fatal(err)
		}
		got := RequireState(t, b, task.ID, active)
		if got.ProgressPercent != p.pct || got.ProgressMessage != p.msg {
			t.Fatalf("progress = %d %q, want %d %q", got.ProgressPercent, got.ProgressMessage, p.pct, p.msg)
		}
	}
	stale := Ref(l)
	stale.Token++
	err := b.Progress(t.Context(), broker.ProgressParams{SessionID: "s1", Lease: stale, Percent: 99, Message: "stale"})
	requireErrIs(t, "Progress with a stale token", err, broker.ErrLeaseLost)
	err = b.Progress(t.Context(), broker.ProgressParams{SessionID: "s2", Lease: Ref(l), Percent: 99, Message: "other"})
	requireErrIs(t, "Progress from another session", err, broker.ErrLeaseLost)
	err = b.Progress(t.Context(), broker.ProgressParams{SessionID: "s1", Lease: broker.LeaseRef{TaskID: NewID(), Token: l.Token}, Percent: 1})
	requireErrIs(t, "Progress of an unknown task", err, broker.ErrLeaseLost)
	if got := GetTask(t, b, task.ID); got.ProgressPercent != 75 || strings.Contains(got.ProgressMessage, "stale") {
		t.Fatalf("a fenced-off Progress changed the task: %d %q", got.ProgressPercent, got.ProgressMessage)
	}
	Succeed(t, b, "s1", l, at(time.Second))
	err = b.Progress(t.Context(), broker.ProgressParams{SessionID: "s1", Lease: Ref(l), Percent: 10})
	requireErrIs(t, "Progress after Complete", err, broker.ErrLeaseLost)
}

// testReclaimFenced: a reclaim skips a lease that was answered, released
// or renewed after it was listed as lapsed.
func testReclaimFenced(t *testing.T, b broker.Broker) {
	for range 3 {
		EnqueueOne(t, b, T0, NewTask("q"))
	}
	ls := Lease(t, b, "s1", "q", 3, T0, TTL)
	now := at(TTL)
	lapsed, _, err := b.LapsedLeases(t.Context(), now)
	if err != nil || len(lapsed) != 3 {
		t.Fatalf("LapsedLeases = %v, %v", lapsed, err)
	}
	// Meanwhile: one answered, one renewed (late, but before the reclaim).
	Succeed(t, b, "s1", ls[0], now)
	if n, err := b.Extend(t.Context(), broker.ExtendParams{SessionID: "s1", Leases: []broker.LeaseRef{Ref(ls[1])}, Now: now, TTL: TTL}); err != nil || n != 1 {
		t.Fatalf("Extend = %d, %v", n, err)
	}
	var ds []broker.Decision
	for _, l := range lapsed {
		ds = append(ds, broker.Retrying(l.SessionID, l.Lease, now, now, "lapsed"))
	}
	if err := b.Reclaim(t.Context(), ds); err != nil {
		t.Fatal(err)
	}
	RequireState(t, b, ls[0].Task.ID, completed)
	RequireState(t, b, ls[1].Task.ID, active)
	if got := RequireState(t, b, ls[2].Task.ID, pending); got.Retried != 1 {
		t.Fatalf("reclaimed task retried %d, want 1", got.Retried)
	}
}
