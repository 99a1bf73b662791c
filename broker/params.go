package broker

import "time"

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
	// LimitGrace is how long past its AttemptBound an attempt may keep
	// its lease: the engine caps every lease it grants, and every renewal
	// of it, at LeaseLimit(task's deadline, its timeout, Now, LimitGrace),
	// for the tasks that have a deadline or a timeout.
	LimitGrace time.Duration
	// Route says which tasks the session can take; the others are passed
	// over and wait for a session that can (Route.Takes).
	Route Route
	// Push says the leases are for a push endpoint: each task's ACTIVE
	// write records it, so that a restart (or a node's death) that finds
	// the task still ACTIVE counts the attempt, since the endpoint may
	// have run it (InterruptedPush), where it hands a session's attempt
	// back unrun. A release or a lapse is decided as for any attempt.
	Push bool
}

// Lease is one leased task.
type Lease struct {
	// Task is the task; its NextProcessAt is when it became ready to run
	// (when known), so the caller can measure how long it waited.
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

// LapsedLease is a lease whose expiry passed, as LapsedLeases reports it
// for the reaper to decide on.
type LapsedLease struct {
	SessionID string
	Lease     LeaseRef
	// Expiry is when the lease lapsed.
	Expiry time.Time
	// Limited is set when Expiry was the attempt's limit (its deadline or
	// timeout plus the grace), not a missed heartbeat.
	Limited bool
	// Retried and MaxRetry are the task's retry count and budget.
	Retried, MaxRetry int32
	// StartAuthorized is set when the attempt's start was authorized
	// (StartAuthorizer): whatever the reaper decides, the engine applies
	// Decision.StartAuthorized to it, as to every decision about such an
	// attempt.
	StartAuthorized bool
	// To is, in Notifier.LeaseLapsed, the state the reaper's decision
	// left the task in (RETRY, PENDING, ARCHIVED, or CANCELED for a task
	// an operator canceled while it ran); unset in LapsedLeases.
	To State
}

// PurgeParams says which terminal tasks Purge deletes: those whose own
// retention ran out at or before Now, COMPLETED tasks without one that
// completed at or before CompletedBefore, and ARCHIVED and CANCELED ones
// that ended at or before ArchivedBefore. Limit bounds how many one call
// deletes.
type PurgeParams struct {
	Now             time.Time
	CompletedBefore time.Time
	ArchivedBefore  time.Time
	Limit           int
}

// PurgeNext tells the purger when the oldest remaining terminal tasks
// ended, so it can compute when to run next. A zero time means none.
type PurgeNext struct {
	// Own is the earliest purge time of a task with its own retention.
	Own time.Time
	// Completed and Archived are when the oldest COMPLETED task, and the
	// oldest ARCHIVED or CANCELED one, without a retention of their own ended.
	Completed, Archived time.Time
	// More is set when the call stopped at its Limit with due tasks left.
	More bool
}

// QueueInfo describes one queue.
type QueueInfo struct {
	Name   string
	Paused bool
	// Config is the queue's configuration as stored (zeros: defaults).
	Config QueueConfig
	// Enqueued counts the tasks ever enqueued into the queue.
	Enqueued int64
	// Counts holds the number of tasks per state.
	Counts Counts
	// Processed and Failed count attempts that ended with a worker's
	// verdict (failed: RETRY or SKIP_RETRY); they persist across restarts.
	Processed int64
	Failed    int64
	// Expired counts the tasks archived unrun because their expiry or
	// deadline passed while they waited; it persists across restarts.
	Expired int64
}

// Info describes an engine.
type Info struct {
	// Engine names the engine ("bbolt", "postgres").
	Engine string
	// DataPath is the engine's file or address (a database URL without
	// its password).
	DataPath string
	// Counts holds the number of tasks per state over all queues.
	Counts Counts
}
