package broker

import (
	"time"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
)

// State is a task's lifecycle state; the values are the wire enum's.
type State = conveyorv1.TaskState

// Outcome is a worker's verdict on an attempt; the values are the wire enum's.
type Outcome = conveyorv1.TaskOutcome

// Task is the full view of one task: what the producer gave and where the
// task is in its lifecycle.
type Task struct {
	ID          string
	Queue       string
	Type        string
	Payload     []byte
	ContentType string
	Metadata    map[string]string
	// Options are the options as the producer gave them (may be nil).
	Options *conveyorv1.TaskOptions

	State         State
	Priority      int32
	Retried       int32
	MaxRetry      int32
	LastError     string
	EnqueuedAt    time.Time
	NextProcessAt time.Time
	StartedAt     time.Time
	CompletedAt   time.Time
	ExpiresAt     time.Time
	// Deadline is Options.Deadline as a time (zero when unset).
	Deadline        time.Time
	Result          []byte
	ProgressPercent int32
	ProgressMessage string
	UniqueKey       string
}

// Dependency is one entry of a task's depends_on list.
type Dependency struct {
	TaskID    string
	OnFailure conveyorv1.OnFailure
}

// NewTask is a validated task ready to store: the server has applied every
// default and resolved every relative time.
type NewTask struct {
	// ID is the task's ULID (assigned by the server when the producer gave none).
	ID          string
	Queue       string
	Type        string
	Payload     []byte
	ContentType string
	Metadata    map[string]string
	// Options are kept verbatim for display and for later behaviour. The
	// engine reads Options.Deadline (the time after which the task must not
	// run), Options.Timeout and Options.RetryPolicy from here.
	Options *conveyorv1.TaskOptions

	Priority int32
	MaxRetry int32
	// ProcessAt delays the task (SCHEDULED) when after the enqueue time.
	ProcessAt time.Time
	// UniqueKey, when set, must not be held by another incomplete task.
	UniqueKey string
	// UniqueUntil ends the claim early; zero holds it until the task completes.
	UniqueUntil time.Time
	// ExpiresAt archives the task if it is still waiting then; zero never.
	ExpiresAt time.Time
	// Retention, when set, overrides the engine's completed-task retention.
	Retention *time.Duration
	// Group puts the task in an aggregation group (state AGGREGATING).
	Group string
	// DependsOn blocks the task until its dependencies succeed.
	DependsOn []Dependency
}

// EnqueueParams holds the tasks of one enqueue call.
type EnqueueParams struct {
	Tasks []NewTask
	// Now is the enqueue time: enqueued_at, and the reference for ProcessAt.
	Now time.Time
}

// EnqueueResult is the outcome of one task of an Enqueue call.
type EnqueueResult struct {
	Task *Task
	Err  error
}

// QueuePick asks for up to N tasks from Queue.
type QueuePick struct {
	Queue string
	N     int
}

// LeaseParams asks for ready tasks for one session.
type LeaseParams struct {
	SessionID string
	// Picks are served in order.
	Picks []QueuePick
	Now   time.Time
	// TTL is the lease duration.
	TTL time.Duration
}

// Lease is one leased task.
type Lease struct {
	Task *Task
	// Token fences the lease: later calls must name it.
	Token uint64
	// Expiry is when the lease lapses unless extended.
	Expiry time.Time
}

// LeaseRef names one lease.
type LeaseRef struct {
	TaskID string
	Token  uint64
}

// ExtendParams renews a session's leases.
type ExtendParams struct {
	SessionID string
	Leases    []LeaseRef
	Now       time.Time
	TTL       time.Duration
}

// CompleteParams reports the outcome of one attempt.
type CompleteParams struct {
	SessionID string
	Lease     LeaseRef
	Outcome   Outcome
	ErrorMsg  string
	Result    []byte
	Now       time.Time
}

// ReleaseParams hands a session's leases back.
type ReleaseParams struct {
	SessionID string
	Leases    []LeaseRef
	Now       time.Time
}

// ProgressParams records a running task's progress.
type ProgressParams struct {
	SessionID string
	Lease     LeaseRef
	Percent   int32
	Message   string
}

// LapsedLease is a lease the reaper expired.
type LapsedLease struct {
	SessionID string
	Lease     LeaseRef
}

// QueueInfo describes one queue.
type QueueInfo struct {
	Name   string
	Paused bool
	// Counts holds the number of tasks per state, indexed by State.
	Counts [10]int64
	// Processed and Failed count attempts since the engine opened.
	Processed int64
	Failed    int64
}

// Info describes an engine.
type Info struct {
	Engine        string
	DataPath      string
	FileSizeBytes int64
	FreePages     int64
	// Counts holds the number of tasks per state over all queues.
	Counts [10]int64
}

// AttemptBound is the latest time an attempt that starts at now may run:
// the earlier of the task's deadline and now plus its timeout, or zero
// when it has neither. (The lease expiry bounds the attempt too, but
// heartbeats move it.)
func (t *Task) AttemptBound(now time.Time) time.Time {
	bound := t.Deadline
	if to := t.Options.GetTimeout(); to != nil && to.AsDuration() > 0 {
		if b := now.Add(to.AsDuration()); bound.IsZero() || b.Before(bound) {
			bound = b
		}
	}
	return bound
}
