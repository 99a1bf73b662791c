package conveyor

import (
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
)

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
	// AtMostOnce: the task never runs twice (see the AtMostOnce option).
	// A Worker runs such a task's handler only once the server has
	// authorized its start (Delivery.Options tells the handler).
	AtMostOnce bool
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
// field this SDK version does not know; later assignments to the
// TaskInfo's fields are not reflected. Its Payload, Result and Metadata
// share memory with that message (they are not copied, to spare a large
// payload's bytes): change their contents only on copies of your own. A
// TaskInfo built by hand is converted from its fields.
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
		AtMostOnce:     o.GetAtMostOnce(),
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
		AtMostOnce:     o.AtMostOnce,
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
