package conveyor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"strings"
	"sync"
	"time"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
)

// Handler runs tasks of one type. What ProcessTask returns decides the
// task's outcome, which the Worker reports to the server:
//
//   - nil: SUCCESS; the task is COMPLETED, with the bytes given to
//     Delivery.SetResult kept as its result. A result larger than
//     MaxResultBytes is not sent: the attempt counts as a failure (RETRY).
//   - an error matching ErrSkipRetry (see SkipRetry): SKIP_RETRY; the task is
//     ARCHIVED at once with the error's text.
//   - any other error: RETRY; the task comes back after the server's
//     backoff with its retry count incremented, or is ARCHIVED once its
//     retries are spent. A panic is recovered and counts as such an error.
//   - any error after the Worker's drain grace ran out (the context's cause
//     is ErrWorkerShutdown): RELEASED; the task goes back to PENDING with no
//     retry counted, to run on another worker.
//
// An error's text is reported as the task's last error, cut to
// MaxErrorMessageBytes.
//
// ctx ends when the task's own deadline or timeout passes, when the server
// cancels the task (cause ErrCanceledByServer), when the worker loses its
// session (ErrSessionLost: the lease is gone and the result would be
// dropped), or when a drain abandons the task (ErrWorkerShutdown). Read the
// reason with context.Cause. A handler should return promptly once ctx is
// done. A task may run more than once (delivery is at least once), so
// handlers should be idempotent; a task enqueued with AtMostOnce is the
// exception, run only once the server has authorized its start.
type Handler interface {
	ProcessTask(ctx context.Context, d *Delivery) error
}

// HandlerFunc adapts a function to a Handler.
type HandlerFunc func(ctx context.Context, d *Delivery) error

// ProcessTask calls f(ctx, d).
func (f HandlerFunc) ProcessTask(ctx context.Context, d *Delivery) error { return f(ctx, d) }

var (
	// ErrSkipRetry marks a permanent failure: a handler error matching it
	// (errors.Is) archives the task at once instead of retrying it. Wrap a
	// cause with SkipRetry, or return an error that wraps ErrSkipRetry.
	ErrSkipRetry = errors.New("conveyor: skip retry")
	// ErrNoHandler is the error a Worker reports for a task whose type has
	// no handler registered. A server that routes by type sends a Worker
	// only the types it registered (see Worker.Handle), so this comes from
	// an older server, or from a push endpoint whose queue carries other
	// types. The task is retried (RETRY, not SKIP_RETRY): another worker
	// may well handle it, and a RETRY keeps the task (and its error)
	// visible until its retries are spent, where a SKIP_RETRY would
	// dead-letter it on the first worker that lacks the handler.
	ErrNoHandler = errors.New("conveyor: no handler for this task type")
	// ErrWorkerShutdown is the context cause of a handler abandoned by a
	// drain: the drain grace (see WithDrainGrace) or the Shutdown context
	// ran out before the handler returned. Whatever error such a handler
	// returns, the task is reported RELEASED: given back with no retry
	// counted.
	ErrWorkerShutdown = errors.New("conveyor: the worker is shutting down")
	// ErrCanceledByServer is the context cause of a handler whose task the
	// server canceled (its lease lapsed or an operator canceled it). The
	// handler's result is still reported; an error counts as RETRY.
	ErrCanceledByServer = errors.New("conveyor: the server canceled the task")
	// ErrSessionLost is the context cause of a handler whose session ended
	// (the connection broke, the server restarted, or Worker.Close): the
	// server has released the task's lease, so its result is not reported.
	// A handler that ignores it keeps a concurrency slot until it returns,
	// and the Worker's next session declares that much less concurrency
	// (see Worker).
	ErrSessionLost = errors.New("conveyor: the worker session ended")
	// ErrLeaseExpired is the context cause of a handler whose lease, as the
	// worker reckons it, lapsed because heartbeats could not be sent: the
	// server has taken the task back.
	ErrLeaseExpired = errors.New("conveyor: the task's lease expired")
)

// SkipRetry wraps err so that returning it from a handler archives the task
// at once (SKIP_RETRY) instead of retrying it. The result matches both
// ErrSkipRetry and err with errors.Is, and its text is err's. SkipRetry(nil)
// returns ErrSkipRetry.
func SkipRetry(err error) error {
	if err == nil {
		return ErrSkipRetry
	}
	return &skipRetryError{err: err}
}

type skipRetryError struct{ err error }

func (e *skipRetryError) Error() string   { return e.err.Error() }
func (e *skipRetryError) Unwrap() []error { return []error{ErrSkipRetry, e.err} }

// The server's defaults for options a task leaves unset (protocol §6.1).
const (
	workerDefaultMaxRetry = 25
	workerDefaultPriority = 4
)

// Delivery is one dispatched task as a handler sees it. Its fields are
// read-only. SetResult and Result are for the handler's goroutine;
// Progress is safe to call from any goroutine.
type Delivery struct {
	// ID is the task's id (a ULID).
	ID string
	// Queue is the queue the task came from.
	Queue string
	// Type is the task's type, the handler routing key.
	Type string
	// Payload is the task's payload, verbatim.
	Payload []byte
	// ContentType names the payload's codec, such as "application/json"
	// (the server's default).
	ContentType string
	// Metadata is the producer's string map (tags, trace propagation such
	// as traceparent). It may be nil.
	Metadata map[string]string
	// Retried counts the failed attempts before this one (0 on the first).
	Retried int
	// MaxRetry is how many retries the task allows: its max_retry option,
	// or the server default of 25 when it was not set.
	MaxRetry int
	// Priority is the task's priority, 1 (lowest) to 9: its priority
	// option, or the server default of 4 when it was not set.
	Priority int
	// Deadline is when the handler's context ends on its own: the earlier
	// of the task's Deadline option and the time the worker received the
	// task plus its Timeout option (the server counts the timeout from the
	// dispatch). The Deadline option is a time on the server's clock: the
	// worker takes it as the time left at the dispatch, counted from the
	// receipt, so that a worker clock ahead of or behind the server's
	// moves neither bound. It is zero when the task has neither. The lease
	// is not part of it: the worker's heartbeats keep the lease alive for
	// as long as the handler runs. A task pushed to an endpoint (see
	// PushHandler) has the PushRequest's deadline instead, when the server
	// aborts the request (it includes both options).
	Deadline time.Time
	// Options are the task's options as the producer gave them.
	Options TaskOptions
	// AttemptID names this delivery of the task: each dispatch of a task,
	// including a redelivery to the same worker, has its own. The Worker
	// echoes it in the task's Result and Heartbeats, so the server applies
	// them to this delivery only (fencing: a late answer for an attempt the
	// server already took back cannot touch the next one). It is empty
	// from a server that does not fence attempts.
	AttemptID string

	// deadline is the Deadline option on this worker's clock: the option
	// is a time on the server's (see serverclock.go).
	deadline time.Time

	ex     *execution
	mu     sync.Mutex
	result []byte
}

// SetResult sets the bytes kept with the task when the handler succeeds
// (visible as TaskInfo.result). The bytes are not copied. The last call
// wins; they are ignored unless the handler returns nil. At most
// MaxResultBytes (1 MiB) are kept: a success with a larger result is
// reported as a failed attempt instead (RETRY, saying how large it was).
func (d *Delivery) SetResult(b []byte) {
	d.mu.Lock()
	d.result = b
	d.mu.Unlock()
}

// Result returns the bytes given to SetResult (nil if none), which is handy
// when testing a handler outside a Worker.
func (d *Delivery) Result() []byte {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.result
}

// Progress records how far along the task is: percent (clamped to 0..100)
// and a short message, which the server keeps for inspection. It is
// advisory and cheap to call often: the worker sends at most one update per
// task per progress interval (see WithProgressInterval), the latest value
// winning, and one last update before the result if a newer value is still
// pending. A message longer than MaxProgressMessageBytes (1 KiB) is cut at
// a UTF-8 boundary and ends with " … [truncated]". It does nothing on a
// Delivery built outside a Worker, on a member of a DeliveryBatch, nor on
// a task pushed to an endpoint (see PushHandler): push has no channel for
// progress.
func (d *Delivery) Progress(percent int, message string) {
	if d.ex == nil {
		return
	}
	d.ex.s.progress(d.ex, int32(min(max(percent, 0), 100)), boundText(message, MaxProgressMessageBytes))
}

// BatchHandler runs the members of a fired aggregation group (protocol
// §5.11) in one call; see Worker.HandleBatch. Every member gets the outcome
// that ProcessBatch's error maps to (as for Handler), except members given
// their own with DeliveryBatch.Fail. A member's SetResult bytes are kept
// when it succeeds. When the server cancels one member, ctx ends (cause
// ErrCanceledByServer) for the whole batch; a member it did not name that
// then fails for it is reported RELEASED, given back with no retry counted.
// Likewise ctx ends at the earliest member's timeout or deadline, and a
// member whose own bound has not passed that then fails is RELEASED.
type BatchHandler interface {
	ProcessBatch(ctx context.Context, b *DeliveryBatch) error
}

// BatchHandlerFunc adapts a function to a BatchHandler.
type BatchHandlerFunc func(ctx context.Context, b *DeliveryBatch) error

// ProcessBatch calls f(ctx, b).
func (f BatchHandlerFunc) ProcessBatch(ctx context.Context, b *DeliveryBatch) error { return f(ctx, b) }

// DeliveryBatch is the members of one batch as a BatchHandler sees them.
type DeliveryBatch struct {
	// Group is the aggregation group key. It is empty for a batch of one:
	// a member that failed or was released comes back alone, as a plain
	// dispatch, and the worker hands it to the batch handler that way.
	Group string
	// Tasks are the members, all of one type.
	Tasks []*Delivery

	mu     sync.Mutex
	failed map[string]error
}

// Fail gives member d its own outcome, that of err as a handler's return
// (SkipRetry archives it; any other error retries it), whatever the batch
// handler returns. A nil err does nothing.
func (b *DeliveryBatch) Fail(d *Delivery, err error) {
	if d == nil || err == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.failed == nil {
		b.failed = map[string]error{}
	}
	b.failed[d.ID] = err
}

// memberErr is the error that decides member d's outcome.
func (b *DeliveryBatch) memberErr(d *Delivery, batchErr error) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err, ok := b.failed[d.ID]; ok {
		return err
	}
	return batchErr
}

// newDelivery builds the Delivery for an envelope. Its Deadline is set
// when its handler starts (see execution.begin).
func newDelivery(env *conveyorv1.TaskEnvelope) *Delivery {
	opts := env.GetOptions()
	d := &Delivery{
		ID:          env.GetId(),
		Queue:       env.GetQueue(),
		Type:        env.GetType(),
		Payload:     env.GetPayload(),
		ContentType: env.GetContentType(),
		Metadata:    env.GetMetadata(),
		Retried:     int(env.GetRetried()),
		MaxRetry:    int(env.GetMaxRetry()),
		Priority:    int(env.GetPriority()),
		Options:     taskOptions(opts),
		AttemptID:   env.GetAttemptId(),
	}
	// Servers older than the envelope's max_retry and priority fields send
	// 0: take the task's options, then the protocol's defaults.
	if d.MaxRetry <= 0 {
		d.MaxRetry = int(opts.GetMaxRetry())
	}
	if d.MaxRetry <= 0 {
		d.MaxRetry = workerDefaultMaxRetry
	}
	if d.Priority <= 0 {
		d.Priority = int(opts.GetPriority())
	}
	if d.Priority <= 0 {
		d.Priority = workerDefaultPriority
	}
	return d
}

// attemptBound is when an attempt of d counted from start must end: the
// earlier of its Deadline option (on this worker's clock) and start plus
// its Timeout option, or zero when it has neither.
func (d *Delivery) attemptBound(start time.Time) time.Time {
	bound := d.deadline
	if to := d.Options.Timeout; to > 0 {
		bound = earlier(bound, start.Add(to))
	}
	return bound
}

// earlier returns the earlier of a and b, where zero means no bound.
func earlier(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

// HandleJSON registers fn for taskType, decoding each payload as JSON into
// a T with encoding/json's defaults (field names match case-insensitively;
// unknown fields are ignored, so producers may add fields). A payload that
// does not decode, or whose content type is not JSON (application/json, or
// a +json type such as application/vnd.acme+json; an empty content type is
// taken as the default, JSON), fails the task with SkipRetry: no retry
// would make it decode. It panics as Worker.Handle does.
func HandleJSON[T any](w *Worker, taskType string, fn func(ctx context.Context, d *Delivery, v T) error) {
	if fn == nil {
		panic("conveyor: HandleJSON with a nil function")
	}
	w.Handle(taskType, HandlerFunc(func(ctx context.Context, d *Delivery) error {
		var v T
		if err := decodeDeliveryJSON(d, &v); err != nil {
			return SkipRetry(err)
		}
		return fn(ctx, d, v)
	}))
}

// decodeDeliveryJSON decodes d's payload into v, refusing (rather than
// guessing) a content type other than JSON (protocol §3).
func decodeDeliveryJSON(d *Delivery, v any) error {
	if !isJSONContentType(d.ContentType) {
		return fmt.Errorf("conveyor: task %s (%s) has content type %q; this handler decodes only application/json",
			d.ID, d.Type, d.ContentType)
	}
	if err := json.Unmarshal(d.Payload, v); err != nil {
		return fmt.Errorf("conveyor: decode the JSON payload of task %s (%s) into %T: %w", d.ID, d.Type, v, err)
	}
	return nil
}

func isJSONContentType(ct string) bool {
	if ct == "" {
		return true
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	return mt == "application/json" || (strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json"))
}

// noHandler answers a task whose type has no registered handler.
type noHandler struct{}

func (noHandler) ProcessTask(_ context.Context, d *Delivery) error {
	return fmt.Errorf("%w %q on this worker", ErrNoHandler, d.Type)
}

// resultFor maps a handler's return to the Result the worker reports (see
// Handler for the rules).
func resultFor(ctx context.Context, d *Delivery, err error) *conveyorv1.Result {
	r := &conveyorv1.Result{TaskId: d.ID, AttemptId: d.AttemptID}
	cause := context.Cause(ctx)
	switch {
	case err == nil:
		r.Outcome = conveyorv1.TaskOutcome_TASK_OUTCOME_SUCCESS
		r.Result = d.Result()
	case ctx.Err() != nil && errors.Is(cause, ErrWorkerShutdown):
		// The drain abandoned the task: whatever the handler made of its
		// canceled context, this is no failure of the task.
		r.Outcome = conveyorv1.TaskOutcome_TASK_OUTCOME_RELEASED
		r.ErrorMsg = "released by a worker shutting down: " + err.Error()
	case errors.Is(err, ErrSkipRetry):
		r.Outcome = conveyorv1.TaskOutcome_TASK_OUTCOME_SKIP_RETRY
		r.ErrorMsg = err.Error()
	case ctx.Err() != nil && errors.Is(cause, context.DeadlineExceeded):
		r.Outcome = conveyorv1.TaskOutcome_TASK_OUTCOME_RETRY
		r.ErrorMsg = "task deadline exceeded"
		if !errors.Is(err, context.DeadlineExceeded) {
			r.ErrorMsg += ": " + err.Error()
		}
	default:
		r.Outcome = conveyorv1.TaskOutcome_TASK_OUTCOME_RETRY
		r.ErrorMsg = err.Error()
	}
	return r
}
