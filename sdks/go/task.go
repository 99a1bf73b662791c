package conveyor

import (
	"fmt"
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
// name must match ^[a-zA-Z0-9][a-zA-Z0-9-_.]*$.
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

// Timeout bounds one attempt: the worker's deadline for an attempt is at
// most its start plus d. Zero means no per-attempt bound.
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
// purged. Retention(0) is sent as an explicit zero and means purge at once;
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

// TaskState is a task's lifecycle state. The values are the numbers of the
// wire's conveyor.v1.TaskState, which never change.
type TaskState int32

// The task states.
const (
	// TaskStateUnspecified is never the state of a stored task.
	TaskStateUnspecified TaskState = 0
	// TaskStateScheduled tasks wait for their process time.
	TaskStateScheduled TaskState = 1
	// TaskStatePending tasks are ready and wait for a worker.
	TaskStatePending TaskState = 2
	// TaskStateActive tasks are leased to a worker and running.
	TaskStateActive TaskState = 3
	// TaskStateRetry tasks failed and wait out their retry backoff.
	TaskStateRetry TaskState = 4
	// TaskStateCompleted tasks succeeded; they are kept for their retention.
	TaskStateCompleted TaskState = 5
	// TaskStateArchived tasks failed for good (dead-lettered) or expired.
	TaskStateArchived TaskState = 6
	// TaskStateCanceled tasks were canceled by an operator.
	TaskStateCanceled TaskState = 7
	// TaskStateAggregating tasks wait in an aggregation group to fire.
	TaskStateAggregating TaskState = 8
	// TaskStateBlocked tasks wait for their dependencies to succeed.
	TaskStateBlocked TaskState = 9
)

var taskStateNames = [...]string{
	"unspecified", "scheduled", "pending", "active", "retry",
	"completed", "archived", "canceled", "aggregating", "blocked",
}

// String returns the state's name in lower case, such as "pending", or
// "TaskState(n)" for a number this SDK does not know.
func (s TaskState) String() string {
	if s >= 0 && int(s) < len(taskStateNames) {
		return taskStateNames[s]
	}
	return fmt.Sprintf("TaskState(%d)", int32(s))
}

// OnFailure says what happens to a dependent task when one of its
// dependencies fails terminally instead of succeeding. The values are the
// numbers of the wire's conveyor.v1.OnFailure.
type OnFailure int32

// The dependency failure policies.
const (
	// OnFailureUnspecified is the zero value; the server treats it as
	// OnFailureBlock.
	OnFailureUnspecified OnFailure = 0
	// OnFailureBlock keeps the dependent task blocked.
	OnFailureBlock OnFailure = 1
	// OnFailureCascadeCancel cancels the dependent task.
	OnFailureCascadeCancel OnFailure = 2
	// OnFailureContinue treats the failed dependency as satisfied.
	OnFailureContinue OnFailure = 3
)

var onFailureNames = [...]string{"unspecified", "block", "cascade_cancel", "continue"}

// String returns the policy's name in lower case, such as "cascade_cancel".
func (f OnFailure) String() string {
	if f >= 0 && int(f) < len(onFailureNames) {
		return onFailureNames[f]
	}
	return fmt.Sprintf("OnFailure(%d)", int32(f))
}

// RetryStrategy selects the shape of a task's retry backoff. The values are
// the numbers of the wire's conveyor.v1.RetryStrategy.
type RetryStrategy int32

// The retry strategies.
const (
	// RetryStrategyUnspecified uses the server's default backoff.
	RetryStrategyUnspecified RetryStrategy = 0
	// RetryStrategyExponential waits base * 2^retried, capped at max, with jitter.
	RetryStrategyExponential RetryStrategy = 1
	// RetryStrategyLinear waits base * (retried + 1), capped at max.
	RetryStrategyLinear RetryStrategy = 2
	// RetryStrategyFixed always waits base.
	RetryStrategyFixed RetryStrategy = 3
)

var retryStrategyNames = [...]string{"unspecified", "exponential", "linear", "fixed"}

// String returns the strategy's name in lower case, such as "exponential".
func (s RetryStrategy) String() string {
	if s >= 0 && int(s) < len(retryStrategyNames) {
		return retryStrategyNames[s]
	}
	return fmt.Sprintf("RetryStrategy(%d)", int32(s))
}

// Dependency is one entry of a task's dependency list.
type Dependency struct {
	// TaskID is the id of the task depended on.
	TaskID string
	// OnFailure governs the dependent task if this dependency fails terminally.
	OnFailure OnFailure
	// State is the dependency's state when the server answered (in
	// TaskInfo.DependsOn). It is output only: the server ignores it on
	// enqueue, and it is TaskStateUnspecified in TaskOptions.DependsOn as
	// the producer gave them.
	State TaskState
}

// TaskLink names another task and its state when the server answered.
type TaskLink struct {
	// TaskID is the linked task's id.
	TaskID string
	// State is the linked task's state.
	State TaskState
}

// TaskError is one failed attempt of a task.
type TaskError struct {
	// Attempt is the attempt's number, 1 for the first.
	Attempt int
	// Message is the failure reason the worker (or the server) gave.
	Message string
	// At is when the attempt ended.
	At time.Time
}

// TaskOptions are the options a task was enqueued with, as the producer
// gave them (see the TaskOption of the same name for each field's meaning).
// A zero field was not given, except Retention, which is nil when not given
// and may be an explicit 0.
type TaskOptions struct {
	MaxRetry  int
	Timeout   time.Duration
	Deadline  time.Time
	ProcessAt time.Time
	ProcessIn time.Duration
	UniqueKey string
	// UniqueTTL is 0 when the claim lasts until the task completes.
	UniqueTTL time.Duration
	Priority  int
	// Retention is nil when the server default applies; an explicit 0
	// means purge at once.
	Retention      *time.Duration
	Group          string
	ExpiresIn      time.Duration
	ExpiresAt      time.Time
	DependsOn      []Dependency
	ConcurrencyKey string
	// RetryStrategy, RetryBase and RetryMax are the task's RetryPolicy.
	RetryStrategy RetryStrategy
	RetryBase     time.Duration
	RetryMax      time.Duration
}

// TaskInfo is the externally visible view of a task, as the server reports
// it: the wire's conveyor.v1.TaskInfo with Go types. Zero times are unset.
type TaskInfo struct {
	// ID is the task's ULID.
	ID string
	// Queue is the queue the task belongs to.
	Queue string
	// Type is the handler routing key.
	Type string
	// State is the task's lifecycle state.
	State TaskState
	// Priority is the effective priority, 1..9.
	Priority int
	// Retried counts the failed attempts so far.
	Retried int
	// MaxRetry is the effective retry budget.
	MaxRetry int
	// LastError is the error message of the latest failed attempt.
	LastError string
	// Payload is the task's payload, verbatim.
	Payload []byte
	// ContentType names the payload's codec.
	ContentType string
	// Metadata is the producer's string map.
	Metadata map[string]string
	// EnqueuedAt is when the server accepted the task.
	EnqueuedAt time.Time
	// NextProcessAt is when a scheduled or retry task becomes due.
	NextProcessAt time.Time
	// StartedAt is when the latest attempt was dispatched.
	StartedAt time.Time
	// CompletedAt is when the task reached a terminal state.
	CompletedAt time.Time
	// Result holds the bytes a worker returned with success.
	Result []byte
	// ProgressPercent is the latest progress a worker reported, 0..100.
	ProgressPercent int
	// ProgressMessage is the latest progress message a worker reported.
	ProgressMessage string
	// Group is the aggregation group key, if any.
	Group string
	// ConcurrencyKey is the concurrency key, if any.
	ConcurrencyKey string
	// DependsOn lists the task's dependencies.
	DependsOn []Dependency
	// Options are the options the task was enqueued with, as given.
	Options TaskOptions
	// ExpiresAt is the resolved pre-dispatch expiry (from ExpiresIn or ExpiresAt).
	ExpiresAt time.Time
	// Dependents lists the tasks that depend on this one, with their states.
	Dependents []TaskLink
	// Errors holds the latest failed attempts, oldest first (the server
	// keeps at most 10).
	Errors []TaskError
	// SessionID names the worker session running an ACTIVE task; empty
	// otherwise.
	SessionID string
	// AttemptID names the current delivery of an ACTIVE task; empty
	// otherwise (and from a server that does not fence attempts).
	AttemptID string

	// wire is the message this TaskInfo was decoded from, if any.
	wire *conveyorv1.TaskInfo
}

// Proto returns the task as the wire type. For a TaskInfo the Client
// returned, it is a copy of the message the server sent, including any
// field this SDK version does not know; later changes to the TaskInfo's
// fields are not reflected. A TaskInfo built by hand is converted from its
// fields.
func (t *TaskInfo) Proto() *conveyorv1.TaskInfo {
	if t.wire != nil {
		return proto.CloneOf(t.wire)
	}
	return &conveyorv1.TaskInfo{
		Id:              t.ID,
		Queue:           t.Queue,
		Type:            t.Type,
		State:           conveyorv1.TaskState(t.State),
		Priority:        int32(t.Priority),
		Retried:         int32(t.Retried),
		MaxRetry:        int32(t.MaxRetry),
		LastError:       t.LastError,
		Payload:         t.Payload,
		ContentType:     t.ContentType,
		Metadata:        t.Metadata,
		EnqueuedAt:      timestampOrNil(t.EnqueuedAt),
		NextProcessAt:   timestampOrNil(t.NextProcessAt),
		StartedAt:       timestampOrNil(t.StartedAt),
		CompletedAt:     timestampOrNil(t.CompletedAt),
		Result:          t.Result,
		ProgressPercent: int32(t.ProgressPercent),
		ProgressMessage: t.ProgressMessage,
		Group:           t.Group,
		ConcurrencyKey:  t.ConcurrencyKey,
		DependsOn:       dependenciesProto(t.DependsOn),
		Options:         t.Options.proto(),
		ExpiresAt:       timestampOrNil(t.ExpiresAt),
		Dependents:      taskLinksProto(t.Dependents),
		Errors:          taskErrorsProto(t.Errors),
		SessionId:       t.SessionID,
		AttemptId:       t.AttemptID,
	}
}

// newTaskInfo decodes a wire TaskInfo; it keeps m for Proto.
func newTaskInfo(m *conveyorv1.TaskInfo) *TaskInfo {
	return &TaskInfo{
		ID:              m.GetId(),
		Queue:           m.GetQueue(),
		Type:            m.GetType(),
		State:           TaskState(m.GetState()),
		Priority:        int(m.GetPriority()),
		Retried:         int(m.GetRetried()),
		MaxRetry:        int(m.GetMaxRetry()),
		LastError:       m.GetLastError(),
		Payload:         m.GetPayload(),
		ContentType:     m.GetContentType(),
		Metadata:        m.GetMetadata(),
		EnqueuedAt:      timeOrZero(m.GetEnqueuedAt()),
		NextProcessAt:   timeOrZero(m.GetNextProcessAt()),
		StartedAt:       timeOrZero(m.GetStartedAt()),
		CompletedAt:     timeOrZero(m.GetCompletedAt()),
		Result:          m.GetResult(),
		ProgressPercent: int(m.GetProgressPercent()),
		ProgressMessage: m.GetProgressMessage(),
		Group:           m.GetGroup(),
		ConcurrencyKey:  m.GetConcurrencyKey(),
		DependsOn:       dependencies(m.GetDependsOn()),
		Options:         taskOptions(m.GetOptions()),
		ExpiresAt:       timeOrZero(m.GetExpiresAt()),
		Dependents:      taskLinks(m.GetDependents()),
		Errors:          taskErrors(m.GetErrors()),
		SessionID:       m.GetSessionId(),
		AttemptID:       m.GetAttemptId(),
		wire:            m,
	}
}

func taskOptions(o *conveyorv1.TaskOptions) TaskOptions {
	out := TaskOptions{
		MaxRetry:       int(o.GetMaxRetry()),
		Timeout:        o.GetTimeout().AsDuration(),
		Deadline:       timeOrZero(o.GetDeadline()),
		ProcessAt:      timeOrZero(o.GetProcessAt()),
		ProcessIn:      o.GetProcessIn().AsDuration(),
		UniqueKey:      o.GetUniqueKey(),
		UniqueTTL:      o.GetUniqueTtl().AsDuration(),
		Priority:       int(o.GetPriority()),
		Group:          o.GetGroup(),
		ExpiresIn:      o.GetExpiresIn().AsDuration(),
		ExpiresAt:      timeOrZero(o.GetExpiresAt()),
		DependsOn:      dependencies(o.GetDependsOn()),
		ConcurrencyKey: o.GetConcurrencyKey(),
		RetryStrategy:  RetryStrategy(o.GetRetryPolicy().GetStrategy()),
		RetryBase:      o.GetRetryPolicy().GetBase().AsDuration(),
		RetryMax:       o.GetRetryPolicy().GetMax().AsDuration(),
	}
	if r := o.GetRetention(); r != nil {
		d := r.AsDuration()
		out.Retention = &d
	}
	return out
}

// proto converts the options back to the wire type; nil when none is set.
func (o TaskOptions) proto() *conveyorv1.TaskOptions {
	m := &conveyorv1.TaskOptions{
		MaxRetry:       int32(o.MaxRetry),
		Timeout:        durationOrNil(o.Timeout),
		Deadline:       timestampOrNil(o.Deadline),
		ProcessAt:      timestampOrNil(o.ProcessAt),
		ProcessIn:      durationOrNil(o.ProcessIn),
		UniqueKey:      o.UniqueKey,
		UniqueTtl:      durationOrNil(o.UniqueTTL),
		Priority:       int32(o.Priority),
		Group:          o.Group,
		ExpiresIn:      durationOrNil(o.ExpiresIn),
		ExpiresAt:      timestampOrNil(o.ExpiresAt),
		DependsOn:      dependenciesProto(o.DependsOn),
		ConcurrencyKey: o.ConcurrencyKey,
	}
	if o.Retention != nil {
		m.Retention = durationpb.New(*o.Retention)
	}
	if o.RetryStrategy != RetryStrategyUnspecified || o.RetryBase != 0 || o.RetryMax != 0 {
		m.RetryPolicy = &conveyorv1.RetryPolicy{
			Strategy: conveyorv1.RetryStrategy(o.RetryStrategy),
			Base:     durationOrNil(o.RetryBase),
			Max:      durationOrNil(o.RetryMax),
		}
	}
	if proto.Size(m) == 0 {
		return nil
	}
	return m
}

func dependencies(in []*conveyorv1.TaskDependency) []Dependency {
	if len(in) == 0 {
		return nil
	}
	out := make([]Dependency, len(in))
	for i, d := range in {
		out[i] = Dependency{TaskID: d.GetTaskId(), OnFailure: OnFailure(d.GetOnFailure()), State: TaskState(d.GetState())}
	}
	return out
}

func dependenciesProto(in []Dependency) []*conveyorv1.TaskDependency {
	if len(in) == 0 {
		return nil
	}
	out := make([]*conveyorv1.TaskDependency, len(in))
	for i, d := range in {
		out[i] = &conveyorv1.TaskDependency{TaskId: d.TaskID, OnFailure: conveyorv1.OnFailure(d.OnFailure),
			State: conveyorv1.TaskState(d.State)}
	}
	return out
}

func taskLinks(in []*conveyorv1.TaskLink) []TaskLink {
	if len(in) == 0 {
		return nil
	}
	out := make([]TaskLink, len(in))
	for i, l := range in {
		out[i] = TaskLink{TaskID: l.GetTaskId(), State: TaskState(l.GetState())}
	}
	return out
}

func taskLinksProto(in []TaskLink) []*conveyorv1.TaskLink {
	if len(in) == 0 {
		return nil
	}
	out := make([]*conveyorv1.TaskLink, len(in))
	for i, l := range in {
		out[i] = &conveyorv1.TaskLink{TaskId: l.TaskID, State: conveyorv1.TaskState(l.State)}
	}
	return out
}

func taskErrors(in []*conveyorv1.TaskError) []TaskError {
	if len(in) == 0 {
		return nil
	}
	out := make([]TaskError, len(in))
	for i, e := range in {
		out[i] = TaskError{Attempt: int(e.GetAttempt()), Message: e.GetMessage(), At: timeOrZero(e.GetAt())}
	}
	return out
}

func taskErrorsProto(in []TaskError) []*conveyorv1.TaskError {
	if len(in) == 0 {
		return nil
	}
	out := make([]*conveyorv1.TaskError, len(in))
	for i, e := range in {
		out[i] = &conveyorv1.TaskError{Attempt: int32(e.Attempt), Message: e.Message, At: timestampOrNil(e.At)}
	}
	return out
}
