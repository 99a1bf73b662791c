package brokertest

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/conveyor-dev/conveyor/broker"
)

// T0 is the suite's epoch: every time the suite passes to a broker is T0
// plus an offset. It is a fixed instant so that failures reproduce.
var T0 = time.Date(2030, time.March, 4, 5, 6, 7, 0, time.UTC)

// TTL is the lease duration the suite uses unless a test needs another.
const TTL = time.Minute

// Retention horizons the suite passes to Purge: it assumes no default of
// an engine's (the purger's policy is the caller's).
const (
	CompletedRetention = 24 * time.Hour
	ArchivedRetention  = 7 * 24 * time.Hour
)

// Task states, shortened for the tests.
const (
	scheduled   = broker.StateScheduled
	pending     = broker.StatePending
	active      = broker.StateActive
	retry       = broker.StateRetry
	completed   = broker.StateCompleted
	archived    = broker.StateArchived
	canceled    = broker.StateCanceled
	aggregating = broker.StateAggregating
	blocked     = broker.StateBlocked
)

// Open opens the engine's store named store with notifier n, and arranges
// for it to be closed at t's cleanup (Close is idempotent by contract, and
// a test may close it first). The first call for a store gets a fresh,
// empty one; a later call for the same store, after the broker opened on
// it was closed, must reopen what that broker left. store is a fresh
// directory from t.TempDir(); an engine that keeps its data elsewhere (a
// database) maps it to a name of its own.
type Open func(t testing.TB, store string, n broker.Notifier) broker.Broker

// Env is a subtest's broker, with what it needs to observe signals and to
// restart the store.
type Env struct {
	t     *testing.T
	open  Open
	store string
	// B is the broker under test.
	B broker.Broker
	// Notes records the signals B sends.
	Notes *Notes
}

// Reopen closes B and opens the same store again, as a server restart
// would; Notes starts empty.
func (e *Env) Reopen() broker.Broker {
	e.t.Helper()
	if err := e.B.Close(); err != nil {
		e.t.Fatalf("Close before reopening: %v", err)
	}
	e.Notes = newNotes()
	e.B = e.open(e.t, e.store, e.Notes)
	return e.B
}

// testCase is one conformance test; it gets a fresh, empty store. Cases
// that need only the broker set fn; those that observe signals or restart
// set env.
type testCase struct {
	name string
	fn   func(t *testing.T, b broker.Broker)
	env  func(t *testing.T, e *Env)
}

// group is a set of test cases about one part of the contract.
type group struct {
	name  string
	cases []testCase
}

func groups() []group {
	return []group{
		{"Enqueue", enqueueCases()},
		{"EnqueueTx", enqueueTxCases()},
		{"GetTask", getTaskCases()},
		{"Lease", leaseCases()},
		{"Complete", completeCases()},
		{"LeaseLifecycle", lifecycleCases()},
		{"Timers", timerCases()},
		{"Purge", purgeCases()},
		{"Queues", queueCases()},
		{"DeleteQueue", deleteQueueCases()},
		{"TimeBounds", timeBoundCases()},
		{"Signals", signalCases()},
		{"Restart", restartCases()},
		{"Operate", operateCases()},
		{"List", listCases()},
		{"Limits", limitCases()},
		{"Bound", boundCases()},
		{"Dependencies", depCases()},
		{"Groups", groupCases()},
		{"Cron", cronCases()},
		{"Route", routeCases()},
		{"Releases", releaseCases()},
		{"History", historyCases()},
		{"Latency", latencyCases()},
	}
}

// Run runs the conformance suite: one subtest per rule of the broker
// contract, grouped by area. Each subtest opens its own fresh store; the
// subtests of a group run in parallel, and Run returns when all of them
// have finished.
func Run(t *testing.T, open Open) {
	t.Helper()
	for _, g := range groups() {
		t.Run(g.name, func(t *testing.T) {
			for _, c := range g.cases {
				t.Run(c.name, func(t *testing.T) {
					t.Parallel()
					e := &Env{t: t, open: open, store: t.TempDir(), Notes: newNotes()}
					e.B = open(t, e.store, e.Notes)
					if c.env != nil {
						c.env(t, e)
						return
					}
					c.fn(t, e.B)
				})
			}
		})
	}
}

// NewTask returns a valid task for queue as the server hands it to an
// engine once defaults are applied: type "test", a small JSON payload,
// priority 4 and 25 retries, PENDING. (A test that sets ProcessAt, Group
// or DependsOn and leaves State as it is gets the state the server would
// choose; see InitialState.)
func NewTask(queue string) broker.NewTask {
	return broker.NewTask{
		Queue:       queue,
		Type:        "test",
		Payload:     []byte(`{"n":1}`),
		ContentType: "application/json",
		Priority:    4,
		MaxRetry:    25,
	}
}

// InitialState is the state the server starts nt in at now: BLOCKED with
// dependencies, AGGREGATING with a group, SCHEDULED with a later
// ProcessAt, else PENDING. The suite's enqueue helpers apply it to tasks
// whose State is unset.
func InitialState(nt broker.NewTask, now time.Time) broker.State {
	switch {
	case len(nt.DependsOn) > 0:
		return blocked
	case nt.Group != "":
		return aggregating
	case nt.ProcessAt.After(now):
		return scheduled
	}
	return pending
}

// WithStates returns tasks with every unset State set to InitialState.
func WithStates(tasks []broker.NewTask, now time.Time) []broker.NewTask {
	out := make([]broker.NewTask, len(tasks))
	for i, nt := range tasks {
		if nt.State == broker.StateUnspecified {
			nt.State = InitialState(nt, now)
		}
		out[i] = nt
	}
	return out
}

// NewID returns a fresh ULID, as a producer would choose for a task id.
func NewID() string { return ulid.Make().String() }

// Enqueue stores tasks with one Broker.Enqueue call at now, fails the test
// unless every task was stored, and returns the stored tasks in order.
func Enqueue(tb testing.TB, b broker.Broker, now time.Time, tasks ...broker.NewTask) []*broker.Task {
	tb.Helper()
	res, err := b.Enqueue(tb.Context(), broker.EnqueueParams{Tasks: WithStates(tasks, now), Now: now})
	if err != nil {
		tb.Fatalf("Enqueue: %v", err)
	}
	if len(res) != len(tasks) {
		tb.Fatalf("Enqueue returned %d results for %d tasks", len(res), len(tasks))
	}
	out := make([]*broker.Task, len(res))
	for i, r := range res {
		if r.Err != nil || r.Task == nil {
			tb.Fatalf("Enqueue: results[%d] = task %v, err %v", i, r.Task, r.Err)
		}
		out[i] = r.Task
	}
	return out
}

// EnqueueOne stores one task at now and returns it, failing the test on
// any error.
func EnqueueOne(tb testing.TB, b broker.Broker, now time.Time, nt broker.NewTask) *broker.Task {
	tb.Helper()
	return Enqueue(tb, b, now, nt)[0]
}

// Lease leases up to n tasks of queue to session at now for ttl, failing
// the test on error.
func Lease(tb testing.TB, b broker.Broker, session, queue string, n int, now time.Time, ttl time.Duration) []broker.Lease {
	tb.Helper()
	ls, err := b.Lease(tb.Context(), broker.LeaseParams{
		SessionID: session,
		Picks:     []broker.QueuePick{{Queue: queue, N: n}},
		Now:       now,
		TTL:       ttl,
	})
	if err != nil {
		tb.Fatalf("Lease %s from %q: %v", session, queue, err)
	}
	if len(ls) > n {
		tb.Fatalf("Lease asked for %d tasks and got %d", n, len(ls))
	}
	return ls
}

// LeaseOne leases one task of queue to session at now for TTL and fails
// the test unless it got exactly one.
func LeaseOne(tb testing.TB, b broker.Broker, session, queue string, now time.Time) broker.Lease {
	tb.Helper()
	ls := Lease(tb, b, session, queue, 1, now, TTL)
	if len(ls) != 1 {
		tb.Fatalf("Lease %s from %q at %s: got %d tasks, want 1", session, queue, now.Format(time.RFC3339Nano), len(ls))
	}
	return ls[0]
}

// Ref names the lease l.
func Ref(l broker.Lease) broker.LeaseRef {
	return broker.LeaseRef{TaskID: l.Task.ID, Token: l.Token}
}

// Decide applies d and returns the task's new state, failing the test on
// error.
func Decide(tb testing.TB, b broker.Broker, d broker.Decision) broker.State {
	tb.Helper()
	st, err := b.Complete(tb.Context(), d)
	if err != nil {
		tb.Fatalf("Complete (kind %d) of %s: %v", d.Kind, d.Lease.TaskID, err)
	}
	return st
}

// Succeed records a worker's success for lease l of session at now.
func Succeed(tb testing.TB, b broker.Broker, session string, l broker.Lease, now time.Time) broker.State {
	tb.Helper()
	return Decide(tb, b, broker.Completed(session, Ref(l), now, nil))
}

// Fail records a worker's failure of lease l of session at now, to be
// retried at due.
func Fail(tb testing.TB, b broker.Broker, session string, l broker.Lease, errMsg string, now, due time.Time) broker.State {
	tb.Helper()
	return Decide(tb, b, broker.Retrying(session, Ref(l), now, due, errMsg).WithVerdict())
}

// Archive records a worker's permanent failure of lease l of session at now.
func Archive(tb testing.TB, b broker.Broker, session string, l broker.Lease, errMsg string, now time.Time) broker.State {
	tb.Helper()
	return Decide(tb, b, broker.Archived(session, Ref(l), now, errMsg).WithVerdict())
}

// LapseMessage is the error the suite's reaper records.
const LapseMessage = "lease lapsed"

// Reap does what the lease reaper does at now, with the suite's own rule
// (a lapse counts a retry; the task is pending again at once, or archived
// once its retries are spent), and returns the lapsed leases it reclaimed.
func Reap(tb testing.TB, b broker.Broker, now time.Time) []broker.LapsedLease {
	tb.Helper()
	lapsed, _, err := b.LapsedLeases(tb.Context(), now)
	if err != nil {
		tb.Fatalf("LapsedLeases: %v", err)
	}
	ds := make([]broker.Decision, len(lapsed))
	for i, l := range lapsed {
		if l.Retried >= l.MaxRetry {
			ds[i] = broker.Archived(l.SessionID, l.Lease, now, LapseMessage)
		} else {
			ds[i] = broker.Retrying(l.SessionID, l.Lease, now, now, LapseMessage)
		}

	}
	if err := b.Reclaim(tb.Context(), ds); err != nil {
		tb.Fatalf("Reclaim: %v", err)
	}
	return lapsed
}

// Purge runs Purge at now with the suite's retention horizons.
func Purge(tb testing.TB, b broker.Broker, now time.Time) broker.PurgeNext {
	tb.Helper()
	next, err := b.Purge(tb.Context(), PurgeAt(now))
	if err != nil {
		tb.Fatalf("Purge: %v", err)
	}
	return next
}

// PurgeAt is the PurgeParams the suite's purger passes at now.
func PurgeAt(now time.Time) broker.PurgeParams {
	return broker.PurgeParams{Now: now, CompletedBefore: now.Add(-CompletedRetention),
		ArchivedBefore: now.Add(-ArchivedRetention), Limit: 10_000}
}

// GetTask returns the task with id, failing the test on error.
func GetTask(tb testing.TB, b broker.Broker, id string) *broker.Task {
	tb.Helper()
	task, err := b.GetTask(tb.Context(), id)
	if err != nil {
		tb.Fatalf("GetTask %s: %v", id, err)
	}
	return task
}

// RequireState fails the test unless the task with id is in state want,
// and returns the task.
func RequireState(tb testing.TB, b broker.Broker, id string, want broker.State) *broker.Task {
	tb.Helper()
	task := GetTask(tb, b, id)
	if task.State != want {
		tb.Fatalf("task %s is %s, want %s", id, task.State, want)
	}
	return task
}

// Ready returns how many tasks of queue Broker.Ready reports.
func Ready(b broker.Broker, queue string) int {
	counts := []int{-1}
	b.Ready([]string{queue}, counts)
	return counts[0]
}

// Queue returns the QueueInfo of the named queue from Broker.Queues, or a
// zero QueueInfo when the broker does not list it.
func Queue(tb testing.TB, b broker.Broker, name string) broker.QueueInfo {
	tb.Helper()
	qs, err := b.Queues(tb.Context())
	if err != nil {
		tb.Fatalf("Queues: %v", err)
	}
	for _, q := range qs {
		if q.Name == name {
			return q
		}
	}
	return broker.QueueInfo{}
}

// Counts is a sparse set of per-state task counts, for comparing with
// QueueInfo.Counts: states not named must be zero.
type Counts map[broker.State]int64

// RequireCounts fails the test unless queue's per-state counts are exactly
// want (states absent from want must be zero).
func RequireCounts(tb testing.TB, b broker.Broker, queue string, want Counts) {
	tb.Helper()
	var w broker.Counts
	for s, n := range want {
		w[s] = n
	}
	if got := Queue(tb, b, queue).Counts; got != w {
		tb.Fatalf("queue %q counts:\n got %s\nwant %s", queue, formatCounts(got), formatCounts(w))
	}
}

func formatCounts(c broker.Counts) string {
	var parts []string
	for s, n := range c {
		if n != 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", broker.State(s), n))
		}
	}
	if len(parts) == 0 {
		return "(all zero)"
	}
	return strings.Join(parts, " ")
}

// requireErrIs fails the test unless errors.Is(err, want).
func requireErrIs(tb testing.TB, what string, err, want error) {
	tb.Helper()
	if !errors.Is(err, want) {
		tb.Fatalf("%s: got error %v, want %v", what, err, want)
	}
}

// at returns T0 plus d.
func at(d time.Duration) time.Time { return T0.Add(d) }

// DiffTasks lists the fields in which two views of the same task differ,
// one line per field; times compare as instants. It returns nil when they
// agree.
func DiffTasks(got, want *broker.Task) []string {
	var d []string
	add := func(field string, g, w any) { d = append(d, fmt.Sprintf("%s: got %v, want %v", field, g, w)) }
	if got.ID != want.ID {
		add("ID", got.ID, want.ID)
	}
	if got.Queue != want.Queue {
		add("Queue", got.Queue, want.Queue)
	}
	if got.Type != want.Type {
		add("Type", got.Type, want.Type)
	}
	if !bytes.Equal(got.Payload, want.Payload) {
		add("Payload", got.Payload, want.Payload)
	}
	if got.ContentType != want.ContentType {
		add("ContentType", got.ContentType, want.ContentType)
	}
	if len(got.Metadata)+len(want.Metadata) > 0 && !maps.Equal(got.Metadata, want.Metadata) {
		add("Metadata", got.Metadata, want.Metadata)
	}
	if !bytes.Equal(got.Options, want.Options) {
		add("Options", got.Options, want.Options)
	}
	if got.AtMostOnce != want.AtMostOnce {
		add("AtMostOnce", got.AtMostOnce, want.AtMostOnce)
	}
	if got.Timeout != want.Timeout {
		add("Timeout", got.Timeout, want.Timeout)
	}
	if fmt.Sprint(got.RetryPolicy) != fmt.Sprint(want.RetryPolicy) {
		add("RetryPolicy", got.RetryPolicy, want.RetryPolicy)
	}
	if (got.Retention == nil) != (want.Retention == nil) || got.Retention != nil && *got.Retention != *want.Retention {
		add("Retention", got.Retention, want.Retention)
	}
	if got.Group != want.Group || got.ConcurrencyKey != want.ConcurrencyKey {
		add("Group/ConcurrencyKey", got.Group+"/"+got.ConcurrencyKey, want.Group+"/"+want.ConcurrencyKey)
	}
	if fmt.Sprint(got.DependsOn) != fmt.Sprint(want.DependsOn) {
		add("DependsOn", got.DependsOn, want.DependsOn)
	}
	if fmt.Sprint(got.Errors) != fmt.Sprint(want.Errors) {
		add("Errors", got.Errors, want.Errors)
	}
	if got.State != want.State {
		add("State", got.State, want.State)
	}
	if got.Priority != want.Priority {
		add("Priority", got.Priority, want.Priority)
	}
	if got.Retried != want.Retried {
		add("Retried", got.Retried, want.Retried)
	}
	if got.MaxRetry != want.MaxRetry {
		add("MaxRetry", got.MaxRetry, want.MaxRetry)
	}
	if got.LastError != want.LastError {
		add("LastError", got.LastError, want.LastError)
	}
	if got.UniqueKey != want.UniqueKey {
		add("UniqueKey", got.UniqueKey, want.UniqueKey)
	}
	if !bytes.Equal(got.Result, want.Result) {
		add("Result", got.Result, want.Result)
	}
	if got.ProgressPercent != want.ProgressPercent || got.ProgressMessage != want.ProgressMessage {
		add("Progress", fmt.Sprintf("%d %q", got.ProgressPercent, got.ProgressMessage),
			fmt.Sprintf("%d %q", want.ProgressPercent, want.ProgressMessage))
	}
	for _, f := range []struct {
		name string
		g, w time.Time
	}{
		{"EnqueuedAt", got.EnqueuedAt, want.EnqueuedAt},
		{"NextProcessAt", got.NextProcessAt, want.NextProcessAt},
		{"StartedAt", got.StartedAt, want.StartedAt},
		{"CompletedAt", got.CompletedAt, want.CompletedAt},
		{"ExpiresAt", got.ExpiresAt, want.ExpiresAt},
		{"Deadline", got.Deadline, want.Deadline},
	} {
		if !f.g.Equal(f.w) {
			add(f.name, f.g, f.w)
		}
	}
	return d
}

// RequireSameTask fails the test when two views of one task differ (see
// DiffTasks); what names the view under test in the message.
func RequireSameTask(tb testing.TB, what string, got, want *broker.Task) {
	tb.Helper()
	if d := DiffTasks(got, want); len(d) > 0 {
		tb.Fatalf("%s differs:\n%s", what, strings.Join(d, "\n"))
	}
}
