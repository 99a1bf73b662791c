package broker

import (
	"errors"
	"fmt"
)

// Sentinel errors of the broker contract. Engines wrap them with context;
// callers test with errors.Is. The server maps each to one protocol code.
var (
	// ErrNotFound means the task (or queue, or cron entry) does not exist.
	ErrNotFound = errors.New("not found")
	// ErrAlreadyExists means a task with the same id exists, or an
	// incomplete task holds the same unique key.
	ErrAlreadyExists = errors.New("already exists")
	// ErrLeaseLost means the lease named by a session and token is no longer
	// the task's current lease (it expired, was released, or was reassigned).
	ErrLeaseLost = errors.New("lease lost")
	// ErrInvalidState means the operation does not apply to the task's
	// current state, such as deleting a running task.
	ErrInvalidState = errors.New("invalid state")
	// ErrInvalidArgument means a parameter is malformed, such as a listing
	// cursor the engine did not issue or a dependency on an unknown task.
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrResourceExhausted means an engine's own limit is reached, such as
	// the number of queues it can tell apart.
	ErrResourceExhausted = errors.New("resource exhausted")
	// ErrQueueFull means a new task was refused because its queue holds
	// as many waiting tasks as its QueueConfig.MaxWaiting allows. It is
	// the only refusal a caller may wait out: room appears as tasks leave
	// the waiting states (Notifier.QueueRoom). Engines return it as a
	// *QueueFullError.
	ErrQueueFull = errors.New("queue full")
	// ErrUnavailable means the engine cannot reach its store right now (a
	// database that is down or cut off): nothing was changed, and the same
	// call may succeed once the store is back. Callers retry; a worker's
	// session stays up meanwhile.
	ErrUnavailable = errors.New("storage unavailable")
	// ErrClosed means the broker has been closed.
	ErrClosed = errors.New("broker closed")

	// ErrAlreadyFired is what FireCron answers for a fire that is not the
	// one the entry waits for: its time is not after the last fire (it
	// was applied before: a restart, a retry, a second node) or is not the
	// entry's NextRun (the entry was updated or resumed since it was read).
	ErrAlreadyFired = errors.New("this fire is not the one the entry waits for")
)

// QueueFullError is the refusal of a new task by its queue's bound: it
// names the queue and the bound, and matches ErrQueueFull.
type QueueFullError struct {
	Queue      string
	MaxWaiting int64
}

// Error reads "queue full: queue "q" is at its max_waiting of N tasks";
// the prefix is what clients match (docs/protocol.md).
func (e *QueueFullError) Error() string {
	return fmt.Sprintf("queue full: queue %q is at its max_waiting of %d tasks", e.Queue, e.MaxWaiting)
}

// Unwrap returns ErrQueueFull.
func (e *QueueFullError) Unwrap() error { return ErrQueueFull }
