package conveyor

import (
	"errors"
	"fmt"
	"strings"

	"connectrpc.com/connect"
)

// Sentinel errors for the protocol's error codes. A failed call returns an
// *Error that keeps the server's message; test it with errors.Is:
//
//	if _, err := client.Enqueue(ctx, "email", p, conveyor.TaskID(id)); errors.Is(err, conveyor.ErrAlreadyExists) {
//		// enqueued before: nothing to do
//	}
var (
	// ErrInvalidArgument means the request violated the contract (a missing
	// type, a value out of range, options that exclude each other). It is
	// not retryable as is. Programmer errors the SDK catches before calling
	// the server (see MaxRetry, Priority, DependsOn) match it too.
	ErrInvalidArgument = errors.New("conveyor: invalid argument")
	// ErrAlreadyExists means an enqueue hit a duplicate task id or a unique
	// key that an incomplete task holds.
	ErrAlreadyExists = errors.New("conveyor: already exists")
	// ErrNotFound means the task named does not exist (or was purged).
	ErrNotFound = errors.New("conveyor: not found")
	// ErrFailedPrecondition means the task or queue is not in a state the
	// operation applies to: canceling a task that already finished,
	// running one that is active, deleting a queue that still holds tasks,
	// a result for an attempt that is no longer current.
	ErrFailedPrecondition = errors.New("conveyor: failed precondition")
	// ErrUnauthenticated means the bearer token is missing or wrong; see
	// WithToken.
	ErrUnauthenticated = errors.New("conveyor: unauthenticated")
	// ErrUnavailable means the server could not be reached or could not
	// serve the call right now (it is down or shutting down); the call may
	// be retried.
	ErrUnavailable = errors.New("conveyor: unavailable")
	// ErrQueueFull means an enqueue found its queue at its max_waiting (the
	// most tasks it may hold waiting to run) and still no room after
	// waiting for some, up to a quarter of the call's remaining deadline
	// and 5 s. Nothing was stored (for EnqueueTx, none of the tasks). It
	// is backpressure: slow down, or try again later. It matches an error
	// of code resource_exhausted whose message begins "queue full: ", the
	// protocol's mark of this refusal; the code alone is also what an
	// oversized request gets.
	ErrQueueFull = errors.New("conveyor: queue full")
)

// queueFullPrefix begins the message of every refusal by a full queue
// (docs/protocol.md).
const queueFullPrefix = "queue full: "

// sentinels maps connect codes to the sentinel errors they match.
var sentinels = map[connect.Code]error{
	connect.CodeInvalidArgument:    ErrInvalidArgument,
	connect.CodeAlreadyExists:      ErrAlreadyExists,
	connect.CodeNotFound:           ErrNotFound,
	connect.CodeFailedPrecondition: ErrFailedPrecondition,
	connect.CodeUnauthenticated:    ErrUnauthenticated,
	connect.CodeUnavailable:        ErrUnavailable,
}

// Error is a failed call: the server's (or the transport's) status code and
// message. errors.Is matches it against the sentinel of its code (such as
// ErrNotFound), and it unwraps to the underlying *connect.Error, so
// connect.CodeOf works on it too.
type Error struct {
	err *connect.Error
}

// Error returns the code and the server's message, such as
// "not_found: task 01J...: not found".
func (e *Error) Error() string { return e.err.Error() }

// Code is the call's status code.
func (e *Error) Code() connect.Code { return e.err.Code() }

// Message is the server's message, without the code.
func (e *Error) Message() string { return e.err.Message() }

// Unwrap returns the underlying *connect.Error.
func (e *Error) Unwrap() error { return e.err }

// Is reports whether target is the sentinel error of e's code, or
// ErrQueueFull for a full queue's refusal.
func (e *Error) Is(target error) bool {
	if target == ErrQueueFull {
		return e.err.Code() == connect.CodeResourceExhausted && strings.HasPrefix(e.err.Message(), queueFullPrefix)
	}
	s, ok := sentinels[e.err.Code()]
	return ok && s == target
}

// wrapError turns a connect error into an *Error; other errors (which the
// connect client does not return for RPCs) pass through.
func wrapError(err error) error {
	var ce *connect.Error
	if errors.As(err, &ce) {
		return &Error{err: ce}
	}
	return err
}

// optionError is a programmer error found before calling the server. It
// matches ErrInvalidArgument.
type optionError struct{ msg string }

func optionErrorf(format string, args ...any) *optionError {
	return &optionError{msg: fmt.Sprintf(format, args...)}
}

func (e *optionError) Error() string { return "conveyor: " + e.msg }

func (e *optionError) Is(target error) bool {
	return target == ErrInvalidArgument
}
