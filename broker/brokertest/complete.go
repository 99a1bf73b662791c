package brokertest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
)

func completeCases() []testCase {
	return []testCase{
		{name: "Completed", fn: testCompleteCompleted},
		{name: "Retrying", fn: testCompleteRetrying},
		{name: "RetryingDueNow", fn: testCompleteRetryingDueNow},
		{name: "Archived", fn: testCompleteArchived},
		{name: "Released", fn: testCompleteReleased},
		{name: "VerdictCounts", fn: testCompleteVerdictCounts},
		{name: "StaleLease", fn: testCompleteStale},
		{name: "Twice", fn: testCompleteTwice},
		{name: "ResultNotRetained", fn: testCompleteResultNotRetained},
		{name: "ErrorHistory", fn: testCompleteErrorHistory},
		{name: "ExpiredWhileRunning", fn: testCompleteExpiredWhileRunning},
		{name: "Batch", fn: testCompleteBatch},
	}
}

func testCompleteCompleted(t *testing.T, b broker.Broker) {
	task := EnqueueOne(t, b, T0, NewTask("q"))
	l := LeaseOne(t, b, "s1", "q", T0)
	done := at(3 * time.Second)
	if st := Decide(t, b, broker.Completed("s1", Ref(l), done, []byte(`{"ok":true}`))); st != completed {
		t.Fatalf("Completed = %s", st)
	}
	got := RequireState(t, b, task.ID, completed)
	if string(got.Result) != `{"ok":true}` || !got.CompletedAt.Equal(done) || got.ProgressPercent != 100 {
		t.Fatalf("completed task: result %q, completed at %v, progress %d", got.Result, got.CompletedAt, got.ProgressPercent)
	}
	if got.Retried != 0 || got.LastError != "" {
		t.Fatalf("successful task has retried %d, last error %q", got.Retried, got.LastError)
	}
	if q := Queue(t, b, "q"); q.Processed != 1 || q.Failed != 0 {
		t.Fatalf("Processed %d Failed %d, want 1 and 0", q.Processed, q.Failed)
	}
	RequireCounts(t, b, "q", Counts{completed: 1})
	if ls := Lease(t, b, "s1", "q", 10, done, TTL); len(ls) != 0 {
		t.Fatalf("leased a completed task")
	}
}

func testCompleteRetrying(t *testing.T, b broker.Broker) {
	task := EnqueueOne(t, b, T0, NewTask("q"))
	l := LeaseOne(t, b, "s1", "q", T0)
	failedAt, due := at(2*time.Second), at(time.Minute)
	if st := Fail(t, b, "s1", l, "connection refused", failedAt, due); st != retry {
		t.Fatalf("Retrying = %s, want RETRY", st)
	}
	got := RequireState(t, b, task.ID, retry)
	if got.Retried != 1 || got.LastError != "connection refused" || !got.NextProcessAt.Equal(due) {
		t.Fatalf("after Retrying: retried %d, last error %q, next %v (want %v)", got.Retried, got.LastError, got.NextProcessAt, due)
	}
	if q := Queue(t, b, "q"); q.Processed != 1 || q.Failed != 1 {
		t.Fatalf("Processed %d Failed %d, want 1 and 1", q.Processed, q.Failed)
	}
	if n := Ready(b, "q"); n != 0 {
		t.Fatalf("Ready = %d while the task backs off", n)
	}
	next, err := b.PromoteDue(t.Context(), due.Add(-time.Nanosecond))
	if err != nil {
		t.Fatal(err)
	}
	if !next.Equal(due) {
		t.Fatalf("PromoteDue next = %v, want the retry time %v", next, due)
	}
	if ls := Lease(t, b, "s1", "q", 1, due.Add(-time.Nanosecond), TTL); len(ls) != 0 {
		t.Fatalf("leased a task still backing off")
	}
	if _, err := b.PromoteDue(t.Context(), due); err != nil {
		t.Fatal(err)
	}
	if got := RequireState(t, b, task.ID, pending); got.Retried != 1 || got.LastError != "connection refused" {
		t.Fatalf("promoted retry: retried %d, last error %q", got.Retried, got.LastError)
	}
	l2 := LeaseOne(t, b, "s2", "q", due)
	if l2.Task.ID != task.ID || l2.Task.Retried != 1 {
		t.Fatalf("second attempt: task %s retried %d", l2.Task.ID, l2.Task.Retried)
	}
	Fail(t, b, "s2", l2, "again", due.Add(time.Second), due.Add(time.Hour))
	if got := RequireState(t, b, task.ID, retry); got.Retried != 2 || got.LastError != "again" {
		t.Fatalf("after the second failure: retried %d, last error %q", got.Retried, got.LastError)
	}
	RequireCounts(t, b, "q", Counts{retry: 1})
}

func testCompleteRetryingDueNow(t *testing.T, b broker.Broker) {
	task := EnqueueOne(t, b, T0, NewTask("q"))
	l := LeaseOne(t, b, "s1", "q", T0)
	if st := Decide(t, b, broker.Retrying("s1", Ref(l), at(time.Second), at(time.Second), "lapsed")); st != pending {
		t.Fatalf("Retrying due now = %s, want PENDING", st)
	}
	if got := RequireState(t, b, task.ID, pending); got.Retried != 1 || got.LastError != "lapsed" {
		t.Fatalf("retried %d, last error %q", got.Retried, got.LastError)
	}
	if n := Ready(b, "q"); n != 1 {
		t.Fatalf("Ready = %d, want 1 (due at once)", n)
	}
}

func testCompleteArchived(t *testing.T, b broker.Broker) {
	nt := NewTask("q")
	nt.UniqueKey = "uk"
	task := EnqueueOne(t, b, T0, nt)
	done := at(time.Second)
	if st := Archive(t, b, "s1", LeaseOne(t, b, "s1", "q", T0), "invalid input", done); st != archived {
		t.Fatalf("Archived = %s", st)
	}
	got := RequireState(t, b, task.ID, archived)
	if got.LastError != "invalid input" || got.Retried != 0 || !got.CompletedAt.Equal(done) {
		t.Fatalf("archived task: last error %q, retried %d, completed at %v", got.LastError, got.Retried, got.CompletedAt)
	}
	if q := Queue(t, b, "q"); q.Processed != 1 || q.Failed != 1 {
		t.Fatalf("Processed %d Failed %d, want 1 and 1", q.Processed, q.Failed)
	}
	RequireCounts(t, b, "q", Counts{archived: 1})
	// An archived task no longer holds its unique key.
	EnqueueOne(t, b, at(2*time.Second), nt)
}

func testCompleteReleased(t *testing.T, b broker.Broker) {
	task := EnqueueOne(t, b, T0, NewTask("q"))
	// One real failure first, so "unchanged" is not just "zero".
	Fail(t, b, "s1", LeaseOne(t, b, "s1", "q", T0), "boom", T0, T0)
	l := LeaseOne(t, b, "s1", "q", at(time.Second))
	if st := Decide(t, b, broker.Released("s1", Ref(l), at(2*time.Second))); st != pending {
		t.Fatalf("Released = %s, want PENDING", st)
	}
	if got := RequireState(t, b, task.ID, pending); got.Retried != 1 {
		t.Fatalf("Released changed retried to %d", got.Retried)
	}
	if n := Ready(b, "q"); n != 1 {
		t.Fatalf("Ready = %d after Released, want 1 (due at once)", n)
	}
	_, err := b.Complete(t.Context(), broker.Completed("s1", Ref(l), at(2*time.Second), nil))
	requireErrIs(t, "Complete after Released", err, broker.ErrLeaseLost)
	if q := Queue(t, b, "q"); q.Processed != 1 || q.Failed != 1 {
		t.Fatalf("Processed %d Failed %d: a release is not an attempt", q.Processed, q.Failed)
	}
}

// testCompleteVerdictCounts: only decisions a worker's verdict made count
// as processed (and as failed unless Completed).
func testCompleteVerdictCounts(t *testing.T, b broker.Broker) {
	Enqueue(t, b, T0, NewTask("q"), NewTask("q"))
	ls := Lease(t, b, "s1", "q", 2, T0, TTL)
	Decide(t, b, broker.Retrying("s1", Ref(ls[0]), T0, T0.Add(time.Minute), "lapsed"))
	Decide(t, b, broker.Archived("s1", Ref(ls[1]), T0, "lapsed"))
	if q := Queue(t, b, "q"); q.Processed != 0 || q.Failed != 0 {
		t.Fatalf("decisions without a verdict counted: processed %d failed %d", q.Processed, q.Failed)
	}
}

func testCompleteStale(t *testing.T, b broker.Broker) {
	task := EnqueueOne(t, b, T0, NewTask("q"))
	l := LeaseOne(t, b, "s1", "q", T0)
	stale := Ref(l)
	stale.Token++
	now := at(time.Second)
	for _, c := range []struct {
		session string
		ref     broker.LeaseRef
	}{
		{"s1", stale}, {"s2", Ref(l)},
		{"s1", broker.LeaseRef{TaskID: NewID(), Token: l.Token}},
		{"s1", broker.LeaseRef{TaskID: "not-a-ulid", Token: l.Token}},
	} {
		for _, d := range []broker.Decision{
			broker.Completed(c.session, c.ref, now, []byte("stale")),
			broker.Retrying(c.session, c.ref, now, now, "stale").WithVerdict(),
			broker.Archived(c.session, c.ref, now, "stale").WithVerdict(),
			broker.Released(c.session, c.ref, now),
		} {
			_, err := b.Complete(t.Context(), d)
			requireErrIs(t, fmt.Sprintf("decision %d with a lease that is not current", d.Kind), err, broker.ErrLeaseLost)
		}
	}
	got := RequireState(t, b, task.ID, active)
	if got.Retried != 0 || got.LastError != "" || got.Result != nil {
		t.Fatalf("a stale decision changed the task: %+v", got)
	}
	if q := Queue(t, b, "q"); q.Processed != 0 || q.Failed != 0 {
		t.Fatalf("a stale decision counted: Processed %d Failed %d", q.Processed, q.Failed)
	}
	if st := Succeed(t, b, "s1", l, at(2*time.Second)); st != completed {
		t.Fatalf("Complete with the current lease = %s", st)
	}
}

func testCompleteTwice(t *testing.T, b broker.Broker) {
	task := EnqueueOne(t, b, T0, NewTask("q"))
	l := LeaseOne(t, b, "s1", "q", T0)
	Succeed(t, b, "s1", l, at(time.Second))
	_, err := b.Complete(t.Context(), broker.Archived("s1", Ref(l), at(2*time.Second), "again").WithVerdict())
	requireErrIs(t, "second decision", err, broker.ErrLeaseLost)
	got := RequireState(t, b, task.ID, completed)
	if !got.CompletedAt.Equal(at(time.Second)) {
		t.Fatalf("second decision moved CompletedAt to %v", got.CompletedAt)
	}
	if q := Queue(t, b, "q"); q.Processed != 1 {
		t.Fatalf("Processed = %d, want 1", q.Processed)
	}
}

func testCompleteResultNotRetained(t *testing.T, b broker.Broker) {
	task := EnqueueOne(t, b, T0, NewTask("q"))
	l := LeaseOne(t, b, "s1", "q", T0)
	buf := []byte("result-1")
	Decide(t, b, broker.Completed("s1", Ref(l), T0, buf))
	// The caller owns buf again as soon as Complete returns (a server
	// reuses its frame buffers).
	copy(buf, "XXXXXXXX")
	if got := GetTask(t, b, task.ID); string(got.Result) != "result-1" {
		t.Fatalf("Result = %q: the broker kept the caller's slice", got.Result)
	}
}

// testCompleteErrorHistory: each failed attempt is remembered, numbered,
// the latest broker.MaxErrorHistory of them.
func testCompleteErrorHistory(t *testing.T, b broker.Broker) {
	task := EnqueueOne(t, b, T0, NewTask("q"))
	const failures = broker.MaxErrorHistory + 2
	now := T0
	for i := range failures {
		l := LeaseOne(t, b, "s1", "q", now)
		now = now.Add(time.Second)
		if i == failures-1 {
			Archive(t, b, "s1", l, fmt.Sprintf("failure %d", i+1), now)
		} else {
			Fail(t, b, "s1", l, fmt.Sprintf("failure %d", i+1), now, now)
		}
	}
	got := RequireState(t, b, task.ID, archived)
	if len(got.Errors) != broker.MaxErrorHistory {
		t.Fatalf("%d errors remembered, want %d", len(got.Errors), broker.MaxErrorHistory)
	}
	first := got.Errors[0]
	if first.Attempt != 3 || first.Message != "failure 3" || !first.At.Equal(T0.Add(3*time.Second)) {
		t.Fatalf("oldest remembered error %+v, want attempt 3", first)
	}
	if last := got.Errors[len(got.Errors)-1]; last.Attempt != failures || last.Message != fmt.Sprintf("failure %d", failures) {
		t.Fatalf("latest error %+v, want attempt %d", last, failures)
	}
}

// testCompleteExpiredWhileRunning: a task whose expiry passed while it ran
// is archived, not made to wait again, whatever the decision said (but a
// success still completes it).
func testCompleteExpiredWhileRunning(t *testing.T, b broker.Broker) {
	nt := NewTask("q")
	nt.ExpiresAt = at(time.Minute)
	a, c, s := EnqueueOne(t, b, T0, nt), EnqueueOne(t, b, T0, nt), EnqueueOne(t, b, T0, nt)
	ls := Lease(t, b, "s1", "q", 3, T0, TTL)
	late := at(2 * time.Minute)
	if st := Fail(t, b, "s1", ls[0], "boom", late, late.Add(time.Second)); st != archived {
		t.Fatalf("failure after the expiry = %s, want ARCHIVED", st)
	}
	if st := Decide(t, b, broker.Released("s1", Ref(ls[1]), late)); st != archived {
		t.Fatalf("release after the expiry = %s, want ARCHIVED", st)
	}
	if st := Succeed(t, b, "s1", ls[2], late); st != completed {
		t.Fatalf("success after the expiry = %s, want COMPLETED", st)
	}
	for _, id := range []string{a.ID, c.ID} {
		if got := RequireState(t, b, id, archived); got.LastError != broker.ExpiredMessage {
			t.Fatalf("last error %q, want %q", got.LastError, broker.ExpiredMessage)
		}
	}
	RequireState(t, b, s.ID, completed)
}

// testCompleteBatch: a batch of decisions is applied each on its own, as
// Complete applies one: the plain ones, and those whose task has more to
// it (a key whose next task is admitted, a unique key freed, a dependent
// told, a cancel that came while it ran); a stale one, or a second one for
// the same lease, fails alone with ErrLeaseLost.
func testCompleteBatch(t *testing.T, b broker.Broker) {
	unique := NewTask("q")
	unique.UniqueKey = "batch"
	ts := Enqueue(t, b, T0, NewTask("q"), NewTask("q"), keyed("q", "k"), unique, NewTask("q"), NewTask("q"))
	waiter := EnqueueOne(t, b, T0, dependent("q", broker.Dependency{TaskID: ts[4].ID, OnFailure: broker.OnFailureBlock}))
	next := EnqueueOne(t, b, T0, keyed("q", "k")) // held behind the keyed one
	ls := Lease(t, b, "s1", "q", 10, T0, TTL)
	if len(ls) != 6 {
		t.Fatalf("leased %d, want the 6 (the second keyed task held)", len(ls))
	}
	byID := map[string]broker.Lease{}
	for _, l := range ls {
		byID[l.Task.ID] = l
	}
	actOK(t, b, broker.ActionCancel, T0, ts[5].ID)
	now := at(time.Second)
	stale := Ref(byID[ts[0].ID])
	stale.Token++
	ds := []broker.Decision{
		broker.Completed("s1", Ref(byID[ts[0].ID]), now, []byte("r0")),
		broker.Retrying("s1", Ref(byID[ts[1].ID]), now, at(time.Hour), "flaky").WithVerdict(),
		broker.Completed("s1", Ref(byID[ts[2].ID]), now, nil),
		broker.Completed("s1", Ref(byID[ts[3].ID]), now, nil),
		broker.Archived("s1", Ref(byID[ts[4].ID]), now, "bad").WithVerdict(),
		broker.Released("s1", Ref(byID[ts[5].ID]), now),
		broker.Completed("s1", stale, now, nil),
		broker.Completed("s1", Ref(byID[ts[0].ID]), now, []byte("again")),
	}
	res, err := b.CompleteBatch(t.Context(), ds)
	if err != nil || len(res) != len(ds) {
		t.Fatalf("CompleteBatch = %v, %v", res, err)
	}
	want := []broker.State{completed, retry, completed, completed, archived, canceled}
	for i, w := range want {
		if res[i].Err != nil || res[i].State != w {
			t.Fatalf("results[%d] = %+v, want %s", i, res[i], w)
		}
	}
	for _, i := range []int{6, 7} {
		if !errors.Is(res[i].Err, broker.ErrLeaseLost) {
			t.Fatalf("results[%d] = %+v, want ErrLeaseLost", i, res[i])
		}
	}
	if got := RequireState(t, b, ts[0].ID, completed); string(got.Result) != "r0" {
		t.Fatalf("result %q, want the first decision's", got.Result)
	}
	RequireState(t, b, waiter.ID, blocked)
	if l := LeaseOne(t, b, "s2", "q", now); l.Task.ID != next.ID {
		t.Fatalf("leased %s, want the keyed task admitted once the first ended", l.Task.ID)
	}
	dupe := NewTask("q")
	dupe.UniqueKey = "batch"
	EnqueueOne(t, b, now, dupe)
	if q := Queue(t, b, "q"); q.Processed != 5 || q.Failed != 2 {
		t.Fatalf("Processed %d Failed %d, want 5 and 2 (verdicts only)", q.Processed, q.Failed)
	}
}
