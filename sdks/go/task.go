package conveyor

import (
	"math"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
)

// Task is a task ready to enqueue: a type, a payload and its options.
// Build one with NewTask or NewJSONTask and pass it to Client.EnqueueBatch
// or Client.EnqueueTx. A Task is not modified by enqueueing it, so it may be
// enqueued again (a repeat with a TaskID fails with ErrAlreadyExists).
type Task struct {
	req *conveyorv1.EnqueueRequest
	// err is the first programmer error an option reported; enqueueing
	// the task returns it without calling the server.
	err *optionError
}

// NewTask returns a task of taskType carrying payload, with opts applied in
// order (a later option overrides an earlier one of the same kind). The
// payload is not copied: do not modify it until the task is enqueued.
//
// The content type defaults, on the server, to application/json; set
// ContentType for other payloads.
func NewTask(taskType string, payload []byte, opts ...TaskOption) *Task {
	t := &Task{req: &conveyorv1.EnqueueRequest{Type: taskType, Payload: payload}}
	for _, o := range opts {
		if o != nil {
			o.applyToTask(t)
		}
	}
	return t
}

// Proto returns a copy of the request this task sends to the server, for
// callers who want the wire type. A programmer error reported by an option
// is not part of it; the Client's enqueue methods return that error.
func (t *Task) Proto() *conveyorv1.EnqueueRequest {
	return proto.CloneOf(t.req)
}

func (t *Task) options() *conveyorv1.TaskOptions {
	if t.req.Options == nil {
		t.req.Options = &conveyorv1.TaskOptions{}
	}
	return t.req.Options
}

func (t *Task) fail(err *optionError) {
	if t.err == nil {
		t.err = err
	}
}

// TaskOption sets one field of a task at enqueue time. Each option maps to
// the field of the same name in conveyor.v1.EnqueueRequest or TaskOptions;
// the server validates the values and applies the defaults documented on
// each option (an invalid value fails the enqueue with ErrInvalidArgument).
// A nil TaskOption is ignored.
type TaskOption interface {
	applyToTask(*Task)
}

type taskOptionFunc func(*Task)

func (f taskOptionFunc) applyToTask(t *Task) { f(t) }

// Queue sets the queue the task is enqueued on. Defaults to "default"; a
// name must match ^[a-zA-Z0-9][a-zA-Z0-9-_.]*$ and be at most 1,024 bytes
// (the server checks it: a bad name fails the enqueue with
// ErrInvalidArgument).
func Queue(name string) TaskOption {
	return taskOptionFunc(func(t *Task) { t.req.Queue = name })
}

// TaskID sets a client-assigned task id, a ULID. Enqueue is idempotent on
// it: a repeat id fails with ErrAlreadyExists, so a producer can retry an
// enqueue whose outcome it did not see. Defaults to an id the server
// assigns.
func TaskID(id string) TaskOption {
	return taskOptionFunc(func(t *Task) { t.req.TaskId = id })
}

// Metadata adds the entries of m to the task's metadata, the string map
// carried to the worker (tags, trace propagation such as traceparent).
// Entries given earlier under the same key are replaced. m is copied.
func Metadata(m map[string]string) TaskOption {
	cp := make(map[string]string, len(m))
	for k, v := range m {
		cp[k] = v
	}
	return taskOptionFunc(func(t *Task) {
		for k, v := range cp {
			setMetadata(t, k, v)
		}
	})
}

// MetadataKV adds one metadata entry, replacing an earlier one with the
// same key.
func MetadataKV(key, value string) TaskOption {
	return taskOptionFunc(func(t *Task) { setMetadata(t, key, value) })
}

func setMetadata(t *Task, k, v string) {
	if t.req.Metadata == nil {
		t.req.Metadata = make(map[string]string)
	}
	t.req.Metadata[k] = v
}

// ContentType names the payload's codec, such as application/json (the
// server's default), application/octet-stream or application/x-protobuf.
// The server stores it and hands it to the worker; it never decodes the
// payload.
func ContentType(ct string) TaskOption {
	return taskOptionFunc(func(t *Task) { t.req.ContentType = ct })
}

// MaxRetry sets how many times a failing task is retried before it is
// archived. 0 means the server default (25). A value that does not fit the
// wire's int32 is reported by the enqueue call as ErrInvalidArgument
// without calling the server.
func MaxRetry(n int) TaskOption {
	return taskOptionFunc(func(t *Task) {
		if v, ok := toInt32("MaxRetry", n, t); ok {
			t.options().MaxRetry = v
		}
	})
}

// Timeout bounds one attempt: the server counts d from the dispatch, and
// the worker's handler has until its receipt plus d. Zero means no
// per-attempt bound. A Worker that could not start the task within d of
// receiving it (every slot busy, or a drain) gives it back unstarted
// (RELEASED, no retry counted).
func Timeout(d time.Duration) TaskOption {
	return taskOptionFunc(func(t *Task) { t.options().Timeout = durationpb.New(d) })
}

// Deadline sets an absolute time after which the task must not run. A zero
// time clears the option.
func Deadline(at time.Time) TaskOption {
	return taskOptionFunc(func(t *Task) { t.options().Deadline = timestampOrNil(at) })
}

// ProcessAt delays the task until at (state scheduled). A zero time clears
// the option. The server rejects it together with ProcessIn or Group.
func ProcessAt(at time.Time) TaskOption {
	return taskOptionFunc(func(t *Task) { t.options().ProcessAt = timestampOrNil(at) })
}

// ProcessIn delays the task by d from the time the server accepts it. The
// server rejects it together with ProcessAt or Group.
func ProcessIn(d time.Duration) TaskOption {
	return taskOptionFunc(func(t *Task) { t.options().ProcessIn = durationpb.New(d) })
}

// Unique claims key among the incomplete tasks: while the claim holds, a
// second enqueue with the same key fails with ErrAlreadyExists. The claim
// lasts ttl after the enqueue, or, with ttl 0, until the task completes.
func Unique(key string, ttl time.Duration) TaskOption {
	return taskOptionFunc(func(t *Task) {
		o := t.options()
		o.UniqueKey = key
		o.UniqueTtl = nil
		if ttl != 0 {
			o.UniqueTtl = durationpb.New(ttl)
		}
	})
}

// Priority sets the task's priority, 1 (lowest) to 9 (highest). 0 means the
// server default (4).
func Priority(p int) TaskOption {
	return taskOptionFunc(func(t *Task) {
		if v, ok := toInt32("Priority", p, t); ok {
			t.options().Priority = v
		}
	})
}

// Retention sets how long the task is kept after it completes before it is
// purged. Retention(0) is sent as an explicit zero and means purge at the
// server's next round (within a second);
// without the option the server default (24h) applies.
func Retention(d time.Duration) TaskOption {
	return taskOptionFunc(func(t *Task) { t.options().Retention = durationpb.New(d) })
}

// Group puts the task in an aggregation group: it waits (state aggregating)
// and is delivered with the rest of its group, of the same queue, as one
// batch to a worker that handles its type as a batch. The server rejects
// it together with ProcessAt, ProcessIn or ConcurrencyKey.
func Group(key string) TaskOption {
	return taskOptionFunc(func(t *Task) { t.options().Group = key })
}

// ExpiresIn archives the task instead of running it if it is still waiting
// (scheduled, pending or retry) d after the server accepts it. The server
// rejects it together with ExpiresAt.
func ExpiresIn(d time.Duration) TaskOption {
	return taskOptionFunc(func(t *Task) { t.options().ExpiresIn = durationpb.New(d) })
}

// ExpiresAt archives the task instead of running it if it is still waiting
// at the time at. A zero time clears the option. The server rejects it
// together with ExpiresIn.
func ExpiresAt(at time.Time) TaskOption {
	return taskOptionFunc(func(t *Task) { t.options().ExpiresAt = timestampOrNil(at) })
}

// DependsOn makes the task wait (state blocked) until the task with id
// completes successfully. The optional onFailure says what happens if that
// task fails terminally instead; it defaults to OnFailureBlock. The option
// may be given several times, once per dependency. More than one onFailure
// is a programmer error, reported by the enqueue call as
// ErrInvalidArgument without calling the server.
func DependsOn(id string, onFailure ...OnFailure) TaskOption {
	return taskOptionFunc(func(t *Task) {
		if len(onFailure) > 1 {
			t.fail(optionErrorf("DependsOn(%q) takes at most one OnFailure, got %d", id, len(onFailure)))
			return
		}
		dep := &conveyorv1.TaskDependency{TaskId: id}
		if len(onFailure) == 1 {
			dep.OnFailure = conveyorv1.OnFailure(onFailure[0])
		}
		o := t.options()
		o.DependsOn = append(o.DependsOn, dep)
	})
}

// ConcurrencyKey caps how many tasks sharing key run at once, up to the
// queue's configured limit. The server rejects it together with Group.
func ConcurrencyKey(key string) TaskOption {
	return taskOptionFunc(func(t *Task) { t.options().ConcurrencyKey = key })
}

// RetryPolicy overrides the server's retry backoff for this task: the
// strategy's first (or only) delay is base, and no delay exceeds max. A
// zero base or max is left unset, meaning the server's default base and no
// cap beyond the strategy's own.
func RetryPolicy(strategy RetryStrategy, base, max time.Duration) TaskOption {
	return taskOptionFunc(func(t *Task) {
		t.options().RetryPolicy = &conveyorv1.RetryPolicy{
			Strategy: conveyorv1.RetryStrategy(strategy),
			Base:     durationOrNil(base),
			Max:      durationOrNil(max),
		}
	})
}

// AtMostOnce makes the task run at most once: never twice, even when a
// worker crashes or loses its connection while running it. The server
// gives it only to a worker that asks before it starts a task (every Go
// Worker does; see Worker), and commits the start before it answers yes.
// If the outcome of a started attempt is then lost (the worker crashed,
// its stream broke, its lease lapsed, or it gave the task back), the task
// is not run again: it is ARCHIVED with a last error beginning "outcome
// unknown:", for an operator to inspect and run again (RunTask) or not.
// Before its start is authorized the usual rules apply (a worker that
// goes away first gives it back unpenalized). An attempt that ends with
// an outcome is handled as for any task: an error is retried as MaxRetry
// allows, so use SkipRetry for a failure that must not be retried either.
// Push endpoints are never given such a task. Defaults to off (at least
// once: a task may run again after a crash, so its handler must be
// idempotent).
func AtMostOnce() TaskOption {
	return taskOptionFunc(func(t *Task) { t.options().AtMostOnce = true })
}

func toInt32(name string, n int, t *Task) (int32, bool) {
	if n < math.MinInt32 || n > math.MaxInt32 {
		t.fail(optionErrorf("%s(%d) is out of range", name, n))
		return 0, false
	}
	return int32(n), true
}

func timestampOrNil(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

func durationOrNil(d time.Duration) *durationpb.Duration {
	if d == 0 {
		return nil
	}
	return durationpb.New(d)
}

func timeOrZero(ts *timestamppb.Timestamp) time.Time {
	if ts == nil {
		return time.Time{}
	}
	return ts.AsTime()
}
