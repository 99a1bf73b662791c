package broker

import (
	"context"
	"errors"
	"time"
)

// Moving a store from one engine to another (conveyor copy) is two
// optional interfaces: an engine's store opened as a CopySource is read
// whole, task by task, and one opened as a CopyTarget is loaded whole. A
// copy runs with no server on either store, so neither changes meanwhile.

// CopyTask is one task as a copy moves it: every field of Task an engine
// keeps (not the views GetTask fills: Dependency.State, Dependents,
// Existed), and what an engine keeps of the task beyond them, so that the
// destination's engine treats it as the source's did.
type CopyTask struct {
	Task
	// UniqueUntil ends the task's unique claim early; zero: the claim
	// holds until the task ends.
	UniqueUntil time.Time
	// CancelRequested marks an ACTIVE task an operator canceled while it
	// ran (its eventual end but a success cancels it).
	CancelRequested bool
	// StartAuthorized marks an ACTIVE at-most-once task whose attempt's
	// start was authorized (StartAuthorizer): the destination's engine
	// archives it, its outcome unknown, where it would release any other
	// ACTIVE task it finds on open.
	StartAuthorized bool
	// WaitingOn lists the dependencies a BLOCKED task still waits for
	// (entries of DependsOn, with their policies); nil for other states.
	WaitingOn []Dependency
	// DependencyFailed is set on a BLOCKED task one of whose dependencies
	// failed under OnFailureBlock: it stays BLOCKED until an operator acts.
	DependencyFailed bool
	// PurgeAt is when a terminal task with a retention of its own is
	// deleted; zero: by its class's horizon (the purger's).
	PurgeAt time.Time
	// GroupFiredAt, for an AGGREGATING task, is when its group fired, when
	// the source keeps fired groups (it then waits, closed, for a worker
	// of its type); zero: its group still gathers, or the source keeps no
	// fired groups (the embedded engine gathers them again on open).
	GroupFiredAt time.Time
	// Seq orders the task in its line (its queue's ready line and its
	// concurrency key's, by priority then Seq; its group's members), when
	// the source keeps such an order; 0: it keeps none, and id order
	// stands for it (as the embedded engine's open orders them).
	Seq int64
}

// HistoryCopy is a store's whole queue history (HistoryKeeper), as a copy
// moves it: every sample of every resolution, and the latest round.
type HistoryCopy struct {
	// Round is HistoryRound's time (zero: none).
	Round time.Time
	// Samples are by resolution, then queue, then bucket (its start).
	Samples []ResolutionSample
}

// ResolutionSample is a history sample with its resolution.
type ResolutionSample struct {
	Resolution HistoryResolution
	HistorySample
}

// CopySource is a store read whole for a copy.
type CopySource interface {
	// CopyQueues lists every queue the store knows, by name: its pause
	// flag, configuration and totals, and its tasks per state as the
	// store counts them (the copy checks it read as many).
	CopyQueues(ctx context.Context) ([]QueueInfo, error)
	// CopyCrons lists every cron entry, with its run history, by id.
	CopyCrons(ctx context.Context) ([]CronEntry, error)
	// CopyTasks calls fn with every task, in id order; fn may keep t. An
	// error from fn ends the walk and is returned.
	CopyTasks(ctx context.Context, fn func(t *CopyTask) error) error
	// CopyHistory reads the queues' history whole.
	CopyHistory(ctx context.Context) (HistoryCopy, error)
	// Close releases the store.
	Close() error
}

// CopyTarget is an empty store loaded whole by a copy. Nothing it is
// given is visible to an engine until Commit; Close without Commit leaves
// the store as it was.
type CopyTarget interface {
	// LoadQueues stores the queues (as CopySource.CopyQueues lists them;
	// their counts are the tasks' to make). It is called first.
	LoadQueues(ctx context.Context, queues []QueueInfo) error
	// LoadTasks stores a batch of tasks; batches come in id order.
	LoadTasks(ctx context.Context, tasks []*CopyTask) error
	// LoadCrons stores the cron entries, run history included.
	LoadCrons(ctx context.Context, crons []CronEntry) error
	// LoadHistory stores the queues' history as CopySource.CopyHistory
	// read it.
	LoadHistory(ctx context.Context, h HistoryCopy) error
	// Seal builds what the engine derives from the tasks (its indexes,
	// claims, keys' admissions, groups), once every task is loaded.
	Seal(ctx context.Context) error
	// CopyQueues, CopyCrons and CopyHistory read back what the store
	// holds once sealed, as CopySource's do, for the copy to check.
	CopyQueues(ctx context.Context) ([]QueueInfo, error)
	CopyCrons(ctx context.Context) ([]CronEntry, error)
	CopyHistory(ctx context.Context) (HistoryCopy, error)
	// Commit makes the copy durable and the store's: an engine opened on
	// it afterwards finds it.
	Commit(ctx context.Context) error
	// Close releases the store, discarding what was loaded unless
	// committed.
	Close() error
}

// Errors of opening a store for a copy.
var (
	// ErrStoreInUse means a server (or another copy) has the store open:
	// a copy needs it stopped.
	ErrStoreInUse = errors.New("the store is in use")
	// ErrStoreNotEmpty means a copy's destination holds tasks, queues or
	// cron entries: a copy only fills an empty store.
	ErrStoreNotEmpty = errors.New("the destination is not empty")
)
