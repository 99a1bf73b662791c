package brokertest

import (
	"testing"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
)

func timerCases() []testCase {
	return []testCase{
		{name: "ExpiryByPromoteDue", fn: testExpiry},
		{name: "ExpiredNotLeased", fn: testExpiredNotLeased},
		{name: "ExpiryWhileRetrying", fn: testExpiryRetry},
		{name: "ExpiryWhileActive", fn: testExpiryWhileActive},
		{name: "ExpiryWhileActiveReleasedBefore", env: testExpiryReleasedBefore},
		{name: "Deadline", fn: testDeadline},
		{name: "ExpiredCounted", env: testExpiredCounted},
		{name: "ExpiredAtReleaseCounted", env: testExpiredAtReleaseCounted},
	}
}

func purgeCases() []testCase {
	return []testCase{
		{name: "DefaultRetention", fn: testPurgeDefault},
		{name: "ZeroRetention", fn: testPurgeZeroRetention},
		{name: "Next", fn: testPurgeNext},
		{name: "Limit", fn: testPurgeLimit},
	}
}

// withDeadline sets a task's deadline.
func withDeadline(nt broker.NewTask, deadline time.Time) broker.NewTask {
	nt.Deadline = deadline
	return nt
}

func testExpiry(t *testing.T, b broker.Broker) {
	p, s, keep := NewTask("q"), NewTask("q"), NewTask("q")
	p.ExpiresAt = at(time.Minute)
	s.ProcessAt, s.ExpiresAt = at(10*time.Minute), at(5*time.Minute)
	ts := Enqueue(t, b, T0, p, s, keep)

	next, err := b.PromoteDue(t.Context(), T0)
	if err != nil {
		t.Fatal(err)
	}
	if next.IsZero() || next.After(p.ExpiresAt) {
		t.Fatalf("PromoteDue next = %v, want no later than the first expiry %v", next, p.ExpiresAt)
	}
	if _, err := b.PromoteDue(t.Context(), p.ExpiresAt.Add(-time.Nanosecond)); err != nil {
		t.Fatal(err)
	}
	RequireState(t, b, ts[0].ID, pending)

	if _, err := b.PromoteDue(t.Context(), p.ExpiresAt); err != nil {
		t.Fatal(err)
	}
	if got := RequireState(t, b, ts[0].ID, archived); got.LastError == "" {
		t.Fatalf("expired task archived without a last error")
	}
	RequireState(t, b, ts[1].ID, scheduled)
	if n := Ready(b, "q"); n != 1 {
		t.Fatalf("Ready = %d, want 1 (only the task without expiry)", n)
	}

	if _, err := b.PromoteDue(t.Context(), s.ExpiresAt); err != nil {
		t.Fatal(err)
	}
	RequireState(t, b, ts[1].ID, archived)
	if next, err := b.PromoteDue(t.Context(), at(time.Hour)); err != nil || !next.IsZero() {
		t.Fatalf("PromoteDue after everything expired = %v, %v; want zero", next, err)
	}
	RequireState(t, b, ts[1].ID, archived)
	RequireState(t, b, ts[2].ID, pending)
	RequireCounts(t, b, "q", Counts{pending: 1, archived: 2})
	requireExpired(t, b, "q", 2)
	if l := LeaseOne(t, b, "s1", "q", at(time.Hour)); l.Task.ID != ts[2].ID {
		t.Fatalf("leased %s, want the task without expiry", l.Task.ID)
	}
}

func requireExpired(t *testing.T, b broker.Broker, queue string, want int64) {
	t.Helper()
	if got := Queue(t, b, queue).Expired; got != want {
		t.Fatalf("queue %q counts %d expired, want %d", queue, got, want)
	}
}

// testExpiredCounted: a queue counts the tasks archived for their expiry
// or their deadline while they waited, and no other archival (a failure
// for good, an operator's archive); the count survives a restart.
func testExpiredCounted(t *testing.T, e *Env) {
	fails := EnqueueOne(t, e.B, T0, NewTask("q"))
	l := LeaseOne(t, e.B, "s1", "q", T0)
	Decide(t, e.B, broker.Archived("s1", Ref(l), T0, "fatal"))
	exp, dl := NewTask("q"), NewTask("q")
	exp.ExpiresAt = at(time.Minute)
	dl.Deadline = at(time.Minute)
	Enqueue(t, e.B, T0, exp, dl)
	byHand := EnqueueOne(t, e.B, T0, NewTask("q"))
	actOK(t, e.B, broker.ActionArchive, T0, byHand.ID)
	RequireState(t, e.B, fails.ID, archived)
	if _, err := e.B.PromoteDue(t.Context(), at(time.Hour)); err != nil {
		t.Fatal(err)
	}
	RequireCounts(t, e.B, "q", Counts{archived: 4})
	requireExpired(t, e.B, "q", 2)
	requireExpired(t, e.Reopen(), "q", 2)
}

// testExpiredAtReleaseCounted: a BLOCKED task whose expiry passed before
// its dependency ended (no timer round ran in between) is archived as
// expired when the dependency ends, and counted as expired.
func testExpiredAtReleaseCounted(t *testing.T, e *Env) {
	a := EnqueueOne(t, e.B, T0, NewTask("deps"))
	nt := dependent("q", dep(a.ID, 0))
	nt.ExpiresAt = at(time.Minute)
	d := EnqueueOne(t, e.B, T0, nt)
	Succeed(t, e.B, "s1", LeaseOne(t, e.B, "s1", "deps", T0), at(2*time.Minute))
	if got := RequireState(t, e.B, d.ID, archived); got.LastError != broker.ExpiredMessage {
		t.Fatalf("last error %q, want %q", got.LastError, broker.ExpiredMessage)
	}
	requireExpired(t, e.B, "q", 1)
	requireExpired(t, e.Reopen(), "q", 1)
}

func testExpiredNotLeased(t *testing.T, b broker.Broker) {
	nt := NewTask("q")
	nt.ExpiresAt = at(time.Minute)
	task := EnqueueOne(t, b, T0, nt)
	keep := EnqueueOne(t, b, T0, NewTask("q"))
	// No PromoteDue ran since it expired: Lease must still not hand it out.
	ls := Lease(t, b, "s1", "q", 10, at(2*time.Minute), TTL)
	if len(ls) != 1 || ls[0].Task.ID != keep.ID {
		t.Fatalf("Lease after expiry got %d tasks, want only the unexpired one", len(ls))
	}
	if _, err := b.PromoteDue(t.Context(), at(2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	RequireState(t, b, task.ID, archived)
	RequireCounts(t, b, "q", Counts{active: 1, archived: 1})
	requireExpired(t, b, "q", 1)
}

func testExpiryRetry(t *testing.T, b broker.Broker) {
	nt := NewTask("q")
	nt.ExpiresAt = at(time.Minute)
	task := EnqueueOne(t, b, T0, nt)
	Fail(t, b, "s1", LeaseOne(t, b, "s1", "q", T0), "boom", at(time.Second), at(time.Hour))
	RequireState(t, b, task.ID, retry)
	// It is waiting (RETRY) when the expiry passes, so it never runs again.
	if _, err := b.PromoteDue(t.Context(), at(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	RequireState(t, b, task.ID, archived)
	if ls := Lease(t, b, "s1", "q", 10, at(2*time.Hour), TTL); len(ls) != 0 {
		t.Fatalf("leased a task that expired while retrying")
	}
	RequireCounts(t, b, "q", Counts{archived: 1})
	requireExpired(t, b, "q", 1)
}

// testExpiryReleasedBefore: a running task's expiry passes by a timer
// round's time, and then a release reaches the broker with a time read
// before the expiry (calls read their times before the broker orders
// them): the task waits again, the timer loop is told, and its next
// round archives the task.
func testExpiryReleasedBefore(t *testing.T, e *Env) {
	b := e.B
	nt := NewTask("q")
	nt.ExpiresAt = at(time.Minute)
	task := EnqueueOne(t, b, T0, nt)
	l := LeaseOne(t, b, "s1", "q", T0)
	if next, err := b.PromoteDue(t.Context(), at(time.Minute+time.Millisecond)); err != nil || !next.IsZero() {
		t.Fatalf("PromoteDue with the task running = %v, %v; want nothing to wait for", next, err)
	}
	e.Notes.DrainTimers()
	Decide(t, b, broker.Released("s1", Ref(l), at(time.Minute-time.Millisecond)))
	RequireState(t, b, task.ID, pending)
	e.Notes.RequireTimers(t, "a released task whose expiry is due")
	next, err := b.PromoteDue(t.Context(), at(2*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if !next.IsZero() {
		t.Fatalf("PromoteDue next = %v with nothing left to wait for", next)
	}
	RequireState(t, b, task.ID, archived)
}

func testExpiryWhileActive(t *testing.T, b broker.Broker) {
	nt := NewTask("q")
	nt.ExpiresAt = at(time.Minute)
	ts := Enqueue(t, b, T0, nt, nt)
	ls := Lease(t, b, "s1", "q", 2, T0, time.Hour)
	if len(ls) != 2 {
		t.Fatalf("leased %d, want 2", len(ls))
	}
	// Expiry is a pre-dispatch TTL: running tasks are not touched.
	if _, err := b.PromoteDue(t.Context(), at(2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	RequireState(t, b, ts[0].ID, active)
	RequireState(t, b, ts[1].ID, active)
	if st := Succeed(t, b, "s1", ls[0], at(3*time.Minute)); st != completed {
		t.Fatalf("Complete of a running task past its expiry = %s, want COMPLETED", st)
	}
	// The other fails; it must not run again, its expiry having passed.
	Fail(t, b, "s1", ls[1], "boom", at(3*time.Minute), at(time.Hour))
	if _, err := b.PromoteDue(t.Context(), at(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if ls := Lease(t, b, "s1", "q", 10, at(2*time.Hour), TTL); len(ls) != 0 {
		t.Fatalf("leased a task whose expiry passed while it ran")
	}
	if _, err := b.PromoteDue(t.Context(), at(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	RequireState(t, b, ts[1].ID, archived)
	RequireCounts(t, b, "q", Counts{completed: 1, archived: 1})
}

func testDeadline(t *testing.T, b broker.Broker) {
	late := EnqueueOne(t, b, T0, withDeadline(NewTask("q"), at(time.Minute)))
	fine := EnqueueOne(t, b, T0, withDeadline(NewTask("q"), at(time.Hour)))
	plain := EnqueueOne(t, b, T0, NewTask("q"))
	if !late.Deadline.Equal(at(time.Minute)) {
		t.Fatalf("returned Deadline = %v", late.Deadline)
	}

	ls := Lease(t, b, "s1", "q", 10, at(2*time.Minute), TTL)
	leased := map[string]broker.Lease{}
	for _, l := range ls {
		leased[l.Task.ID] = l
	}
	if _, ok := leased[late.ID]; ok {
		t.Fatalf("leased a task whose deadline passed")
	}
	if len(leased) != 2 {
		t.Fatalf("leased %d tasks, want the 2 without a passed deadline", len(ls))
	}
	if l := leased[fine.ID]; !l.Task.Deadline.Equal(at(time.Hour)) {
		t.Fatalf("leased task Deadline = %v, want %v", l.Task.Deadline, at(time.Hour))
	}
	if l := leased[plain.ID]; !l.Task.Deadline.IsZero() {
		t.Fatalf("task without a deadline leased with Deadline %v", l.Task.Deadline)
	}
	if got := RequireState(t, b, late.ID, archived); got.LastError != broker.DeadlinePassedMessage {
		t.Fatalf("task archived for its deadline has last error %q", got.LastError)
	}
	if q := Queue(t, b, "q"); q.Processed != 0 || q.Failed != 0 {
		t.Fatalf("a task dropped before it ran counted as processed %d, failed %d", q.Processed, q.Failed)
	}
	if n := Ready(b, "q"); n != 0 {
		t.Fatalf("Ready = %d, want 0", n)
	}
	RequireCounts(t, b, "q", Counts{active: 2, archived: 1})
}

func testPurgeDefault(t *testing.T, b broker.Broker) {
	task := EnqueueOne(t, b, T0, NewTask("q"))
	dead := EnqueueOne(t, b, T0, NewTask("q"))
	EnqueueOne(t, b, T0, NewTask("q"))
	Succeed(t, b, "s1", LeaseOne(t, b, "s1", "q", T0), T0)
	Archive(t, b, "s1", LeaseOne(t, b, "s1", "q", T0), "bad", at(time.Second))

	next := Purge(t, b, at(time.Hour))
	if !next.Completed.Equal(T0) || !next.Archived.Equal(at(time.Second)) || !next.Own.IsZero() || next.More {
		t.Fatalf("Purge next = %+v, want the completed task's end T0 and the archived one's T0+1s", next)
	}
	RequireCounts(t, b, "q", Counts{pending: 1, completed: 1, archived: 1})

	// The completed horizon passes the first; the archived one is kept.
	Purge(t, b, at(CompletedRetention))
	_, err := b.GetTask(t.Context(), task.ID)
	requireErrIs(t, "GetTask of a purged task", err, broker.ErrNotFound)
	RequireState(t, b, dead.ID, archived)
	next = Purge(t, b, at(ArchivedRetention))
	if !next.Archived.Equal(at(time.Second)) || !next.Completed.IsZero() {
		t.Fatalf("Purge next = %+v, want only the archived task left", next)
	}
	Purge(t, b, at(ArchivedRetention+time.Second))
	_, err = b.GetTask(t.Context(), dead.ID)
	requireErrIs(t, "GetTask of a purged archived task", err, broker.ErrNotFound)
	RequireCounts(t, b, "q", Counts{pending: 1})
}

func testPurgeZeroRetention(t *testing.T, b broker.Broker) {
	zero := time.Duration(0)
	nt := NewTask("q")
	nt.Retention = &zero
	gone := EnqueueOne(t, b, T0, nt)
	kept := EnqueueOne(t, b, T0, NewTask("q"))
	done := at(time.Second)
	for _, l := range Lease(t, b, "s1", "q", 2, T0, TTL) {
		Succeed(t, b, "s1", l, done)
	}
	RequireCounts(t, b, "q", Counts{completed: 2})

	if next := Purge(t, b, done); !next.Own.IsZero() {
		t.Fatalf("Purge next = %+v after the only own-retention task went", next)
	}
	_, err := b.GetTask(t.Context(), gone.ID)
	requireErrIs(t, "GetTask of a task with zero retention after Purge", err, broker.ErrNotFound)
	RequireState(t, b, kept.ID, completed)
	RequireCounts(t, b, "q", Counts{completed: 1})
	if q := Queue(t, b, "q"); q.Processed != 2 {
		t.Fatalf("Processed = %d: purging does not undo attempts", q.Processed)
	}
	// The purged id is free again.
	nt.ID = gone.ID
	EnqueueOne(t, b, at(2*time.Second), nt)
}

func testPurgeNext(t *testing.T, b broker.Broker) {
	if next := Purge(t, b, T0); next != (broker.PurgeNext{}) {
		t.Fatalf("Purge of an empty broker = %+v; want zero", next)
	}
	long := 2 * time.Hour
	nt := NewTask("q")
	nt.Retention = &long
	task := EnqueueOne(t, b, T0, nt)
	if next := Purge(t, b, T0); next != (broker.PurgeNext{}) {
		t.Fatalf("Purge with no terminal task = %+v; want zero", next)
	}
	Succeed(t, b, "s1", LeaseOne(t, b, "s1", "q", T0), T0)
	next := Purge(t, b, T0)
	if !next.Own.Equal(at(long)) {
		t.Fatalf("Purge with a retained task = %+v; want Own at T0+2h", next)
	}
	Purge(t, b, next.Own)
	_, err := b.GetTask(t.Context(), task.ID)
	requireErrIs(t, "GetTask after Purge at the returned time", err, broker.ErrNotFound)
	if next := Purge(t, b, next.Own); next != (broker.PurgeNext{}) {
		t.Fatalf("Purge with nothing left = %+v; want zero", next)
	}
}

func testPurgeLimit(t *testing.T, b broker.Broker) {
	zero := time.Duration(0)
	nt := NewTask("q")
	nt.Retention = &zero
	for range 5 {
		EnqueueOne(t, b, T0, nt)
	}
	for _, l := range Lease(t, b, "s1", "q", 5, T0, TTL) {
		Succeed(t, b, "s1", l, T0)
	}
	p := PurgeAt(at(time.Second))
	p.Limit = 2
	for i, want := range []int64{3, 1, 0} {
		next, err := b.Purge(t.Context(), p)
		if err != nil {
			t.Fatal(err)
		}
		if got := Queue(t, b, "q").Counts[completed]; got != want {
			t.Fatalf("after purge %d: %d completed left, want %d", i+1, got, want)
		}
		if next.More != (want > 0) {
			t.Fatalf("after purge %d: More = %v with %d left", i+1, next.More, want)
		}
	}
}
