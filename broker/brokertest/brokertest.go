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
	"google.golang.org/protobuf/proto"

	"github.com/conveyor-dev/conveyor/broker"
	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
)

// T0 is the suite's epoch: every time the suite passes to a broker is T0
// plus an offset. It is a fixed instant so that failures reproduce.
var T0 = time.Date(2030, time.March, 4, 5, 6, 7, 0, time.UTC)

// TTL is the lease duration the suite uses unless a test needs another.
const TTL = time.Minute

// Task states and outcomes, shortened for the tests.
const (
	scheduled   = conveyorv1.TaskState_TASK_STATE_SCHEDULED
	pending     = conveyorv1.TaskState_TASK_STATE_PENDING
	active      = conveyorv1.TaskState_TASK_STATE_ACTIVE
	retry       = conveyorv1.TaskState_TASK_STATE_RETRY
	completed   = conveyorv1.TaskState_TASK_STATE_COMPLETED
	archived    = conveyorv1.TaskState_TASK_STATE_ARCHIVED
	aggregating = conveyorv1.TaskState_TASK_STATE_AGGREGATING
	blocked     = conveyorv1.TaskState_TASK_STATE_BLOCKED

	success     = conveyorv1.TaskOutcome_TASK_OUTCOME_SUCCESS
	failRetry   = conveyorv1.TaskOutcome_TASK_OUTCOME_RETRY
	skipRetry   = conveyorv1.TaskOutcome_TASK_OUTCOME_SKIP_RETRY
	released    = conveyorv1.TaskOutcome_TASK_OUTCOME_RELEASED
	unspecified = conveyorv1.TaskOutcome_TASK_OUTCOME_UNSPECIFIED
)

// testCase is one conformance test; it gets a fresh, empty broker.
type testCase struct {
	name string
	fn   func(t *testing.T, b broker.Broker)
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
		{"TimeBounds", timeBoundCases()},
		{"Queues", queueCases()},
	}
}

// Run runs the conformance suite: one subtest per rule of the broker
// contract, grouped by area (Enqueue, EnqueueTx, GetTask, Lease, Complete,
// LeaseLifecycle, Timers, Purge, Queues). open must return a fresh, empty
// broker on a real store each time it is called, and arrange for it to be
// closed at t's cleanup; it is called once per subtest, from that
// subtest's goroutine. The subtests of a group run in parallel; Run
// returns when all of them have finished.
//
// The suite assumes the engine's default completed-task retention is
// 24 hours and that it honors the task's Options.RetryPolicy with
// broker.Backoff.
func Run(t *testing.T, open func(t *testing.T) broker.Broker) {
	t.Helper()
	for _, g := range groups() {
		t.Run(g.name, func(t *testing.T) {
			for _, c := range g.cases {
				t.Run(c.name, func(t *testing.T) {
					t.Parallel()
					c.fn(t, open(t))
				})
			}
		})
	}
}

// NewTask returns a valid task for queue as the server hands it to an
// engine once defaults are applied: type "test", a small JSON payload,
// priority 4 and 25 retries.
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

// NewID returns a fresh ULID, as a producer would choose for a task id.
func NewID() string { return ulid.Make().String() }

// Enqueue stores tasks with one Broker.Enqueue call at now, fails the test
// unless every task was stored, and returns the stored tasks in order.
func Enqueue(tb testing.TB, b broker.Broker, now time.Time, tasks ...broker.NewTask) []*broker.Task {
	tb.Helper()
	res, err := b.Enqueue(tb.Context(), broker.EnqueueParams{Tasks: tasks, Now: now})
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

// Complete reports outcome (with errMsg) for lease l of session at now and
// returns the task's new state, failing the test on error.
func Complete(tb testing.TB, b broker.Broker, session string, l broker.Lease, outcome broker.Outcome, errMsg string, now time.Time) broker.State {
	tb.Helper()
	st, err := b.Complete(tb.Context(), broker.CompleteParams{
		SessionID: session, Lease: Ref(l), Outcome: outcome, ErrorMsg: errMsg, Now: now,
	})
	if err != nil {
		tb.Fatalf("Complete %s of %s: %v", outcome, l.Task.ID, err)
	}
	return st
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
	var w [10]int64
	for s, n := range want {
		w[s] = n
	}
	if got := Queue(tb, b, queue).Counts; got != w {
		tb.Fatalf("queue %q counts:\n got %s\nwant %s", queue, formatCounts(got), formatCounts(w))
	}
}

func formatCounts(c [10]int64) string {
	var parts []string
	for s, n := range c {
		if n != 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", conveyorv1.TaskState(s), n))
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
// one line per field; Options compare with proto.Equal and times as
// instants. It returns nil when they agree.
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
	if !proto.Equal(got.Options, want.Options) {
		add("Options", got.Options, want.Options)
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
