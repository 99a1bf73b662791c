package brokertest

import (
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/conveyor-dev/conveyor/broker"
	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
)

func timerCases() []testCase {
	return []testCase{
		{"ExpiryByPromoteDue", testExpiry},
		{"ExpiredNotLeased", testExpiredNotLeased},
		{"ExpiryWhileRetrying", testExpiryRetry},
		{"ExpiryWhileActive", testExpiryWhileActive},
		{"Deadline", testDeadline},
	}
}

func purgeCases() []testCase {
	return []testCase{
		{"DefaultRetention", testPurgeDefault},
		{"ZeroRetention", testPurgeZeroRetention},
		{"Next", testPurgeNext},
	}
}

// withDeadline sets a task's deadline as the server does: in the flat
// field and in the producer's options.
func withDeadline(nt broker.NewTask, deadline time.Time) broker.NewTask {
	nt.Options = &conveyorv1.TaskOptions{Deadline: timestamppb.New(deadline)}
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
	if l := LeaseOne(t, b, "s1", "q", at(time.Hour)); l.Task.ID != ts[2].ID {
		t.Fatalf("leased %s, want the task without expiry", l.Task.ID)
	}
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
}

func testExpiryRetry(t *testing.T, b broker.Broker) {
	nt := NewTask("q")
	nt.ExpiresAt = at(time.Minute)
	nt.Options = &conveyorv1.TaskOptions{RetryPolicy: &conveyorv1.RetryPolicy{
		Strategy: conveyorv1.RetryStrategy_RETRY_STRATEGY_FIXED, Base: durationpb.New(time.Hour)}}
	task := EnqueueOne(t, b, T0, nt)
	Complete(t, b, "s1", LeaseOne(t, b, "s1", "q", T0), failRetry, "boom", at(time.Second))
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
}

func testExpiryWhileActive(t *testing.T, b broker.Broker) {
	nt := NewTask("q")
	nt.ExpiresAt = at(time.Minute)
	nt.Options = &conveyorv1.TaskOptions{RetryPolicy: &conveyorv1.RetryPolicy{
		Strategy: conveyorv1.RetryStrategy_RETRY_STRATEGY_FIXED, Base: durationpb.New(time.Hour)}}
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
	if st := Complete(t, b, "s1", ls[0], success, "", at(3*time.Minute)); st != completed {
		t.Fatalf("Complete of a running task past its expiry = %s, want COMPLETED", st)
	}
	// The other fails; it must not run again, its expiry having passed.
	Complete(t, b, "s1", ls[1], failRetry, "boom", at(3*time.Minute))
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
	if got := RequireState(t, b, late.ID, archived); got.LastError == "" {
		t.Fatalf("task archived for its deadline has no last error")
	}
	if n := Ready(b, "q"); n != 0 {
		t.Fatalf("Ready = %d, want 0", n)
	}
	RequireCounts(t, b, "q", Counts{active: 2, archived: 1})
}

func testPurgeDefault(t *testing.T, b broker.Broker) {
	task := EnqueueOne(t, b, T0, NewTask("q"))
	EnqueueOne(t, b, T0, NewTask("q"))
	Complete(t, b, "s1", LeaseOne(t, b, "s1", "q", T0), success, "", T0)

	next, err := b.Purge(t.Context(), at(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if next.IsZero() || !next.After(at(time.Hour)) || next.After(at(25*time.Hour)) {
		t.Fatalf("Purge next = %v, want in (T0+1h, T0+25h]", next)
	}
	RequireState(t, b, task.ID, completed)
	RequireCounts(t, b, "q", Counts{pending: 1, completed: 1})

	if _, err := b.Purge(t.Context(), at(25*time.Hour)); err != nil {
		t.Fatal(err)
	}
	_, err = b.GetTask(t.Context(), task.ID)
	requireErrIs(t, "GetTask of a purged task", err, broker.ErrNotFound)
	RequireCounts(t, b, "q", Counts{pending: 1})
}

func testPurgeZeroRetention(t *testing.T, b broker.Broker) {
	zero := time.Duration(0)
	nt := NewTask("q")
	nt.Retention = &zero
	nt.Options = &conveyorv1.TaskOptions{Retention: durationpb.New(0)}
	gone := EnqueueOne(t, b, T0, nt)
	kept := EnqueueOne(t, b, T0, NewTask("q"))
	done := at(time.Second)
	for _, l := range Lease(t, b, "s1", "q", 2, T0, TTL) {
		Complete(t, b, "s1", l, success, "", done)
	}
	RequireCounts(t, b, "q", Counts{completed: 2})

	if _, err := b.Purge(t.Context(), done); err != nil {
		t.Fatal(err)
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
	if next, err := b.Purge(t.Context(), T0); err != nil || !next.IsZero() {
		t.Fatalf("Purge of an empty broker = %v, %v; want zero", next, err)
	}
	task := EnqueueOne(t, b, T0, NewTask("q"))
	if next, err := b.Purge(t.Context(), T0); err != nil || !next.IsZero() {
		t.Fatalf("Purge with no terminal task = %v, %v; want zero", next, err)
	}
	Complete(t, b, "s1", LeaseOne(t, b, "s1", "q", T0), success, "", T0)
	next, err := b.Purge(t.Context(), T0)
	if err != nil || next.IsZero() || !next.After(T0) {
		t.Fatalf("Purge with a retained task = %v, %v; want a time after T0", next, err)
	}
	if _, err := b.Purge(t.Context(), next); err != nil {
		t.Fatal(err)
	}
	_, err = b.GetTask(t.Context(), task.ID)
	requireErrIs(t, "GetTask after Purge at the returned time", err, broker.ErrNotFound)
	if next, err := b.Purge(t.Context(), next); err != nil || !next.IsZero() {
		t.Fatalf("Purge with nothing left = %v, %v; want zero", next, err)
	}
}
