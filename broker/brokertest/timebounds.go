package brokertest

import (
	"testing"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
)

// Times at the edges of what the protocol's Timestamp and Duration hold,
// far outside what int64 nanoseconds can: engines must saturate, never wrap.
var (
	farFuture = time.Date(9999, time.December, 31, 23, 59, 59, 0, time.UTC)
	year2300  = time.Date(2300, time.January, 1, 0, 0, 0, 0, time.UTC)
	year1600  = time.Date(1600, time.January, 1, 0, 0, 0, 0, time.UTC)
	// maxDuration is what a 10,000-year Duration becomes (AsDuration saturates).
	maxDuration = time.Duration(1<<63 - 1)
)

func timeBoundCases() []testCase {
	return []testCase{
		{name: "ProcessAtFarFuture", fn: testProcessAtFarFuture},
		{name: "ProcessAtLongPast", fn: testProcessAtLongPast},
		{name: "ExpiresAtFarFuture", fn: testExpiresAtFarFuture},
		{name: "UniqueUntilFarFuture", fn: testUniqueUntilFarFuture},
		{name: "DeadlineFarFuture", fn: testDeadlineFarFuture},
		{name: "RetentionHuge", fn: testRetentionHuge},
		{name: "BackoffHuge", fn: testBackoffHuge},
		{name: "AtTheEpoch", fn: testTimesAtEpoch},
	}
}

// testTimesAtEpoch: a deadline or an expiry of exactly the Unix epoch is
// set, and long past: the task is archived, never leased. (An engine may
// store the epoch as a nanosecond after it.)
func testTimesAtEpoch(t *testing.T, b broker.Broker) {
	epoch := time.Unix(0, 0)
	dl, ex := NewTask("q"), NewTask("q")
	dl.Deadline, ex.ExpiresAt = epoch, epoch
	tasks := Enqueue(t, b, T0, dl, ex)
	if d := tasks[0].Deadline; d.IsZero() || d.After(epoch.Add(time.Microsecond)) {
		t.Fatalf("deadline at the epoch reads back as %v", d)
	}
	if x := tasks[1].ExpiresAt; x.IsZero() || x.After(epoch.Add(time.Microsecond)) {
		t.Fatalf("expires_at at the epoch reads back as %v", x)
	}
	if ls := Lease(t, b, "s1", "q", 2, T0, TTL); len(ls) != 0 {
		t.Fatalf("leased %d tasks whose deadline or expiry is the epoch", len(ls))
	}
	if got := RequireState(t, b, tasks[0].ID, archived); got.LastError != broker.DeadlinePassedMessage {
		t.Fatalf("deadline at the epoch: archived with %q, want %q", got.LastError, broker.DeadlinePassedMessage)
	}
	if got := RequireState(t, b, tasks[1].ID, archived); got.LastError != broker.ExpiredMessage {
		t.Fatalf("expires_at at the epoch: archived with %q, want %q", got.LastError, broker.ExpiredMessage)
	}
}

func testProcessAtFarFuture(t *testing.T, b broker.Broker) {
	nt := NewTask("q")
	nt.ProcessAt = year2300
	task := EnqueueOne(t, b, T0, nt)
	if task.State != scheduled {
		t.Fatalf("process_at in 2300: state %s, want SCHEDULED", task.State)
	}
	if _, err := b.PromoteDue(t.Context(), at(100*365*24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	RequireState(t, b, task.ID, scheduled)
	if n := Ready(b, "q"); n != 0 {
		t.Fatalf("Ready = %d a century later, want 0", n)
	}
}

func testProcessAtLongPast(t *testing.T, b broker.Broker) {
	nt := NewTask("q")
	nt.ProcessAt = year1600
	task := EnqueueOne(t, b, T0, nt)
	if task.State != pending {
		t.Fatalf("process_at in 1600: state %s, want PENDING (due now)", task.State)
	}
	if l := LeaseOne(t, b, "s1", "q", T0); l.Task.ID != task.ID {
		t.Fatalf("leased %s, want %s", l.Task.ID, task.ID)
	}
}

func testExpiresAtFarFuture(t *testing.T, b broker.Broker) {
	nt := NewTask("q")
	nt.ExpiresAt = farFuture
	task := EnqueueOne(t, b, T0, nt)
	if _, err := b.PromoteDue(t.Context(), at(time.Hour)); err != nil {
		t.Fatal(err)
	}
	RequireState(t, b, task.ID, pending)
	LeaseOne(t, b, "s1", "q", at(time.Hour))
}

func testUniqueUntilFarFuture(t *testing.T, b broker.Broker) {
	a := NewTask("q")
	a.UniqueKey, a.UniqueUntil = "k", T0.Add(maxDuration)
	EnqueueOne(t, b, T0, a)
	dup := NewTask("q")
	dup.UniqueKey = "k"
	res := enqueueResults(t, b, at(time.Hour), dup)
	requireErrIs(t, "a duplicate of a claim held for 292 years", res[0].Err, broker.ErrAlreadyExists)
}

func testDeadlineFarFuture(t *testing.T, b broker.Broker) {
	nt := withDeadline(NewTask("q"), farFuture)
	nt.Timeout = maxDuration
	task := EnqueueOne(t, b, T0, nt)
	l := LeaseOne(t, b, "s1", "q", T0)
	if want := T0.Add(TTL); !l.Expiry.Equal(want) {
		t.Fatalf("lease of a task with a far deadline and timeout expires %v, want the TTL's %v", l.Expiry, want)
	}
	if lapsed := Reap(t, b, at(time.Second)); len(lapsed) != 0 {
		t.Fatalf("a lease with a far deadline lapsed: %v", lapsed)
	}
	RequireState(t, b, task.ID, active)
}

func testRetentionHuge(t *testing.T, b broker.Broker) {
	nt := NewTask("q")
	r := maxDuration
	nt.Retention = &r
	task := EnqueueOne(t, b, T0, nt)
	l := LeaseOne(t, b, "s1", "q", T0)
	Succeed(t, b, "s1", l, T0)
	Purge(t, b, at(365*24*time.Hour))
	RequireState(t, b, task.ID, completed)
}

func testBackoffHuge(t *testing.T, b broker.Broker) {
	task := EnqueueOne(t, b, T0, NewTask("q"))
	l := LeaseOne(t, b, "s1", "q", T0)
	if st := Fail(t, b, "s1", l, "boom", T0, farFuture); st != retry {
		t.Fatalf("state %s after a failure due in 9999, want RETRY", st)
	}
	if _, err := b.PromoteDue(t.Context(), at(time.Hour)); err != nil {
		t.Fatal(err)
	}
	got := RequireState(t, b, task.ID, retry)
	if got.NextProcessAt.Before(T0.Add(200 * 365 * 24 * time.Hour)) {
		t.Fatalf("next attempt at %v, want far in the future", got.NextProcessAt)
	}
}
