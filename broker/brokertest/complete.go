package brokertest

import (
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/conveyor-dev/conveyor/broker"
	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
)

func completeCases() []testCase {
	return []testCase{
		{"Success", testCompleteSuccess},
		{"Retry", testCompleteRetry},
		{"RetryPolicy", testCompleteRetryPolicy},
		{"RetryExhausted", testCompleteRetryExhausted},
		{"SkipRetry", testCompleteSkipRetry},
		{"Released", testCompleteReleased},
		{"StaleLease", testCompleteStale},
		{"Twice", testCompleteTwice},
		{"ResultNotRetained", testCompleteResultNotRetained},
	}
}

func testCompleteSuccess(t *testing.T, b broker.Broker) {
	task := EnqueueOne(t, b, T0, NewTask("q"))
	l := LeaseOne(t, b, "s1", "q", T0)
	done := at(3 * time.Second)
	st, err := b.Complete(t.Context(), broker.CompleteParams{
		SessionID: "s1", Lease: Ref(l), Outcome: success, Result: []byte(`{"ok":true}`), Now: done,
	})
	if err != nil || st != completed {
		t.Fatalf("Complete SUCCESS = %s, %v", st, err)
	}
	got := RequireState(t, b, task.ID, completed)
	if string(got.Result) != `{"ok":true}` {
		t.Fatalf("Result = %q", got.Result)
	}
	if !got.CompletedAt.Equal(done) {
		t.Fatalf("CompletedAt = %v, want %v", got.CompletedAt, done)
	}
	if got.Retried != 0 || got.LastError != "" {
		t.Fatalf("successful task has retried %d, last error %q", got.Retried, got.LastError)
	}
	q := Queue(t, b, "q")
	if q.Processed != 1 || q.Failed != 0 {
		t.Fatalf("Processed %d Failed %d, want 1 and 0", q.Processed, q.Failed)
	}
	RequireCounts(t, b, "q", Counts{completed: 1})
	if ls := Lease(t, b, "s1", "q", 10, done, TTL); len(ls) != 0 {
		t.Fatalf("leased a completed task")
	}
}

func testCompleteRetry(t *testing.T, b broker.Broker) {
	nt := NewTask("q")
	nt.MaxRetry = 3
	task := EnqueueOne(t, b, T0, nt)
	l := LeaseOne(t, b, "s1", "q", T0)
	failedAt := at(2 * time.Second)
	if st := Complete(t, b, "s1", l, failRetry, "connection refused", failedAt); st != retry {
		t.Fatalf("Complete RETRY = %s, want RETRY", st)
	}
	got := RequireState(t, b, task.ID, retry)
	if got.Retried != 1 || got.LastError != "connection refused" {
		t.Fatalf("after RETRY: retried %d, last error %q", got.Retried, got.LastError)
	}
	due := got.NextProcessAt
	if !due.After(failedAt) || due.After(failedAt.Add(broker.DefaultBackoffMax)) {
		t.Fatalf("NextProcessAt = %v, want after %v and within the backoff cap", due, failedAt)
	}
	q := Queue(t, b, "q")
	if q.Processed != 1 || q.Failed != 1 {
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
	RequireState(t, b, task.ID, retry)
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
	Complete(t, b, "s2", l2, failRetry, "again", due.Add(time.Second))
	if got := RequireState(t, b, task.ID, retry); got.Retried != 2 || got.LastError != "again" {
		t.Fatalf("after the second RETRY: retried %d, last error %q", got.Retried, got.LastError)
	}
	RequireCounts(t, b, "q", Counts{retry: 1})
}

func testCompleteRetryPolicy(t *testing.T, b broker.Broker) {
	policies := map[string]*conveyorv1.RetryPolicy{
		"fixed": {Strategy: conveyorv1.RetryStrategy_RETRY_STRATEGY_FIXED, Base: durationpb.New(10 * time.Second)},
		"linear": {Strategy: conveyorv1.RetryStrategy_RETRY_STRATEGY_LINEAR, Base: durationpb.New(7 * time.Second),
			Max: durationpb.New(10 * time.Second)},
	}
	want := map[string][]time.Duration{
		"fixed":  {10 * time.Second, 10 * time.Second, 10 * time.Second},
		"linear": {7 * time.Second, 10 * time.Second, 10 * time.Second},
	}
	for name, policy := range policies {
		nt := NewTask(name)
		nt.Options = &conveyorv1.TaskOptions{RetryPolicy: policy}
		task := EnqueueOne(t, b, T0, nt)
		now := T0
		for attempt, delay := range want[name] {
			l := LeaseOne(t, b, "s1", name, now)
			now = now.Add(time.Second)
			Complete(t, b, "s1", l, failRetry, "x", now)
			got := RequireState(t, b, task.ID, retry)
			if !got.NextProcessAt.Equal(now.Add(delay)) {
				t.Fatalf("%s attempt %d: retry at %v, want %v (+%s)", name, attempt, got.NextProcessAt, now.Add(delay), delay)
			}
			now = got.NextProcessAt
			if _, err := b.PromoteDue(t.Context(), now); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func testCompleteRetryExhausted(t *testing.T, b broker.Broker) {
	none := NewTask("none")
	none.MaxRetry = 0
	none.UniqueKey = "none"
	tn := EnqueueOne(t, b, T0, none)
	if st := Complete(t, b, "s1", LeaseOne(t, b, "s1", "none", T0), failRetry, "fatal-ish", at(time.Second)); st != archived {
		t.Fatalf("RETRY with max_retry 0 = %s, want ARCHIVED", st)
	}
	if got := RequireState(t, b, tn.ID, archived); got.LastError != "fatal-ish" {
		t.Fatalf("LastError = %q", got.LastError)
	}
	// An archived task no longer holds its unique key.
	EnqueueOne(t, b, at(2*time.Second), none)

	one := NewTask("one")
	one.MaxRetry = 1
	one.Options = &conveyorv1.TaskOptions{RetryPolicy: &conveyorv1.RetryPolicy{
		Strategy: conveyorv1.RetryStrategy_RETRY_STRATEGY_FIXED, Base: durationpb.New(time.Second)}}
	to := EnqueueOne(t, b, T0, one)
	if st := Complete(t, b, "s1", LeaseOne(t, b, "s1", "one", T0), failRetry, "first", at(time.Second)); st != retry {
		t.Fatalf("first RETRY with max_retry 1 = %s, want RETRY", st)
	}
	if _, err := b.PromoteDue(t.Context(), at(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	if st := Complete(t, b, "s1", LeaseOne(t, b, "s1", "one", at(2*time.Second)), failRetry, "second", at(3*time.Second)); st != archived {
		t.Fatalf("RETRY with retried >= max_retry = %s, want ARCHIVED", st)
	}
	if got := RequireState(t, b, to.ID, archived); got.LastError != "second" {
		t.Fatalf("LastError = %q, want the last attempt's", got.LastError)
	}
	RequireCounts(t, b, "one", Counts{archived: 1})
	if q := Queue(t, b, "one"); q.Processed != 2 || q.Failed != 2 {
		t.Fatalf("Processed %d Failed %d, want 2 and 2", q.Processed, q.Failed)
	}
	if _, err := b.PromoteDue(t.Context(), at(time.Hour)); err != nil {
		t.Fatal(err)
	}
	RequireState(t, b, to.ID, archived)
}

func testCompleteSkipRetry(t *testing.T, b broker.Broker) {
	nt := NewTask("q")
	nt.MaxRetry = 10
	task := EnqueueOne(t, b, T0, nt)
	done := at(time.Second)
	if st := Complete(t, b, "s1", LeaseOne(t, b, "s1", "q", T0), skipRetry, "invalid input", done); st != archived {
		t.Fatalf("SKIP_RETRY = %s, want ARCHIVED", st)
	}
	got := RequireState(t, b, task.ID, archived)
	if got.LastError != "invalid input" || got.Retried != 0 || !got.CompletedAt.Equal(done) {
		t.Fatalf("archived task: last error %q, retried %d, completed at %v", got.LastError, got.Retried, got.CompletedAt)
	}
	q := Queue(t, b, "q")
	if q.Processed != 1 || q.Failed != 1 {
		t.Fatalf("Processed %d Failed %d, want 1 and 1", q.Processed, q.Failed)
	}
	RequireCounts(t, b, "q", Counts{archived: 1})
}

func testCompleteReleased(t *testing.T, b broker.Broker) {
	nt := NewTask("q")
	nt.Options = &conveyorv1.TaskOptions{RetryPolicy: &conveyorv1.RetryPolicy{
		Strategy: conveyorv1.RetryStrategy_RETRY_STRATEGY_FIXED, Base: durationpb.New(time.Second)}}
	task := EnqueueOne(t, b, T0, nt)
	// One real failure first, so "unchanged" is not just "zero".
	Complete(t, b, "s1", LeaseOne(t, b, "s1", "q", T0), failRetry, "boom", T0)
	if _, err := b.PromoteDue(t.Context(), at(time.Second)); err != nil {
		t.Fatal(err)
	}
	for i, outcome := range []broker.Outcome{released, unspecified} {
		now := at(time.Duration(i+2) * time.Second)
		l := LeaseOne(t, b, "s1", "q", now)
		if st := Complete(t, b, "s1", l, outcome, "", now); st != pending {
			t.Fatalf("%s = %s, want PENDING", outcome, st)
		}
		if got := RequireState(t, b, task.ID, pending); got.Retried != 1 {
			t.Fatalf("%s changed retried to %d", outcome, got.Retried)
		}
		if n := Ready(b, "q"); n != 1 {
			t.Fatalf("Ready = %d after %s, want 1 (due at once)", n, outcome)
		}
		_, err := b.Complete(t.Context(), broker.CompleteParams{SessionID: "s1", Lease: Ref(l), Outcome: success, Now: now})
		requireErrIs(t, "Complete after "+outcome.String(), err, broker.ErrLeaseLost)
	}
	l := LeaseOne(t, b, "s2", "q", at(5*time.Second))
	if l.Task.Retried != 1 {
		t.Fatalf("redelivered with retried %d, want 1", l.Task.Retried)
	}
	if q := Queue(t, b, "q"); q.Processed != 1 || q.Failed != 1 {
		t.Fatalf("Processed %d Failed %d: a release is not an attempt", q.Processed, q.Failed)
	}
}

func testCompleteStale(t *testing.T, b broker.Broker) {
	task := EnqueueOne(t, b, T0, NewTask("q"))
	l := LeaseOne(t, b, "s1", "q", T0)
	stale := Ref(l)
	stale.Token++
	for _, outcome := range []broker.Outcome{success, failRetry, skipRetry, released} {
		for _, p := range []broker.CompleteParams{
			{SessionID: "s1", Lease: stale},
			{SessionID: "s2", Lease: Ref(l)},
			{SessionID: "s1", Lease: broker.LeaseRef{TaskID: NewID(), Token: l.Token}},
			{SessionID: "s1", Lease: broker.LeaseRef{TaskID: "not-a-ulid", Token: l.Token}},
		} {
			p.Outcome, p.ErrorMsg, p.Result, p.Now = outcome, "stale", []byte("stale"), at(time.Second)
			_, err := b.Complete(t.Context(), p)
			requireErrIs(t, "Complete "+outcome.String()+" with a lease that is not current", err, broker.ErrLeaseLost)
		}
	}
	got := RequireState(t, b, task.ID, active)
	if got.Retried != 0 || got.LastError != "" || got.Result != nil {
		t.Fatalf("a stale Complete changed the task: %+v", got)
	}
	RequireCounts(t, b, "q", Counts{active: 1})
	if q := Queue(t, b, "q"); q.Processed != 0 || q.Failed != 0 {
		t.Fatalf("a stale Complete counted: Processed %d Failed %d", q.Processed, q.Failed)
	}
	if st := Complete(t, b, "s1", l, success, "", at(2*time.Second)); st != completed {
		t.Fatalf("Complete with the current lease = %s", st)
	}
}

func testCompleteTwice(t *testing.T, b broker.Broker) {
	task := EnqueueOne(t, b, T0, NewTask("q"))
	l := LeaseOne(t, b, "s1", "q", T0)
	Complete(t, b, "s1", l, success, "", at(time.Second))
	for _, outcome := range []broker.Outcome{success, failRetry, skipRetry, released} {
		_, err := b.Complete(t.Context(), broker.CompleteParams{SessionID: "s1", Lease: Ref(l), Outcome: outcome, Now: at(2 * time.Second)})
		requireErrIs(t, "second Complete ("+outcome.String()+")", err, broker.ErrLeaseLost)
	}
	got := RequireState(t, b, task.ID, completed)
	if !got.CompletedAt.Equal(at(time.Second)) {
		t.Fatalf("second Complete moved CompletedAt to %v", got.CompletedAt)
	}
	if q := Queue(t, b, "q"); q.Processed != 1 {
		t.Fatalf("Processed = %d, want 1", q.Processed)
	}
}

func testCompleteResultNotRetained(t *testing.T, b broker.Broker) {
	task := EnqueueOne(t, b, T0, NewTask("q"))
	l := LeaseOne(t, b, "s1", "q", T0)
	buf := []byte("result-1")
	_, err := b.Complete(t.Context(), broker.CompleteParams{SessionID: "s1", Lease: Ref(l), Outcome: success, Result: buf, Now: T0})
	if err != nil {
		t.Fatal(err)
	}
	// The caller owns buf again as soon as Complete returns (a server
	// reuses its frame buffers).
	copy(buf, "XXXXXXXX")
	if got := GetTask(t, b, task.ID); string(got.Result) != "result-1" {
		t.Fatalf("Result = %q: the broker kept the caller's slice", got.Result)
	}
}
