package server

// This file is the one place the wire's types (conveyor.v1) and the broker
// contract's meet: every conversion between them is here, but for the two
// the worker sessions use too (the envelope of a dispatch, and the task's
// stored options), which are in server/internal/wire.

import (
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/conveyor-dev/conveyor/broker"
	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/server/internal/wire"
)

func ts(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

// The contract numbers its states, outcomes, strategies and failure
// policies as the wire does, so each conversion is a cast.

func wireState(s broker.State) conveyorv1.TaskState   { return conveyorv1.TaskState(s) }
func brokerState(s conveyorv1.TaskState) broker.State { return broker.State(s) }

// encodeOptions is the producer's options as the broker keeps them: the
// fields this server knows. Unknown fields are ignored (protocol §8), so
// not stored: kept, they would travel with the task to every worker, as
// many bytes as a request holds, past every limit on a task's size.
func encodeOptions(o *conveyorv1.TaskOptions) []byte {
	if o == nil {
		return nil
	}
	discardUnknown(o.ProtoReflect())
	b, err := proto.Marshal(o)
	if err != nil {
		return nil // a decoded message always encodes
	}
	return b
}

// discardUnknown clears the unknown fields of m and of every message in it.
func discardUnknown(m protoreflect.Message) {
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList() && fd.Message() != nil:
			for i := range v.List().Len() {
				discardUnknown(v.List().Get(i).Message())
			}
		case fd.IsMap() && fd.MapValue().Message() != nil:
			v.Map().Range(func(_ protoreflect.MapKey, e protoreflect.Value) bool {
				discardUnknown(e.Message())
				return true
			})
		case !fd.IsList() && !fd.IsMap() && fd.Message() != nil:
			discardUnknown(v.Message())
		}
		return true
	})
	if len(m.GetUnknown()) > 0 {
		m.SetUnknown(nil)
	}
}

func brokerRetryPolicy(p *conveyorv1.RetryPolicy) *broker.RetryPolicy {
	if p == nil {
		return nil
	}
	return &broker.RetryPolicy{Strategy: broker.RetryStrategy(p.GetStrategy()),
		Base: p.GetBase().AsDuration(), Max: p.GetMax().AsDuration()}
}

func wireDependencies(deps []broker.Dependency) []*conveyorv1.TaskDependency {
	if len(deps) == 0 {
		return nil
	}
	out := make([]*conveyorv1.TaskDependency, len(deps))
	for i, d := range deps {
		out[i] = &conveyorv1.TaskDependency{TaskId: d.TaskID, OnFailure: conveyorv1.OnFailure(d.OnFailure), State: wireState(d.State)}
	}
	return out
}

func wireLinks(links []broker.TaskLink) []*conveyorv1.TaskLink {
	if len(links) == 0 {
		return nil
	}
	out := make([]*conveyorv1.TaskLink, len(links))
	for i, l := range links {
		out[i] = &conveyorv1.TaskLink{TaskId: l.TaskID, State: wireState(l.State)}
	}
	return out
}

func wireErrors(errs []broker.AttemptError) []*conveyorv1.TaskError {
	if len(errs) == 0 {
		return nil
	}
	out := make([]*conveyorv1.TaskError, len(errs))
	for i, e := range errs {
		out[i] = &conveyorv1.TaskError{Attempt: e.Attempt, Message: e.Message, At: ts(e.At)}
	}
	return out
}

// taskInfo is the wire view of a task. attemptID names the delivery of an
// ACTIVE task's lease (see sessions.Hub.AttemptID).
func taskInfo(t *broker.Task, attemptID func(uint64) string) *conveyorv1.TaskInfo {
	info := &conveyorv1.TaskInfo{
		Id:              t.ID,
		Queue:           t.Queue,
		Type:            t.Type,
		State:           wireState(t.State),
		Priority:        t.Priority,
		Retried:         t.Retried,
		MaxRetry:        t.MaxRetry,
		LastError:       t.LastError,
		Payload:         t.Payload,
		ContentType:     t.ContentType,
		Metadata:        t.Metadata,
		EnqueuedAt:      ts(t.EnqueuedAt),
		NextProcessAt:   ts(t.NextProcessAt),
		StartedAt:       ts(t.StartedAt),
		CompletedAt:     ts(t.CompletedAt),
		Result:          t.Result,
		ProgressPercent: t.ProgressPercent,
		ProgressMessage: t.ProgressMessage,
		Group:           t.Group,
		ConcurrencyKey:  t.ConcurrencyKey,
		DependsOn:       wireDependencies(t.DependsOn),
		Options:         wire.DecodeOptions(t.Options),
		ExpiresAt:       ts(t.ExpiresAt),
		Errors:          wireErrors(t.Errors),
		Dependents:      wireLinks(t.Dependents),
		SessionId:       t.SessionID,
	}
	if t.LeaseToken != 0 && attemptID != nil {
		info.AttemptId = attemptID(t.LeaseToken)
	}
	return info
}

// queueInfo is the wire view of a queue.
func queueInfo(q broker.QueueInfo) *conveyorv1.QueueInfo {
	c := q.Counts
	return &conveyorv1.QueueInfo{
		Name: q.Name, Paused: q.Paused,
		Scheduled: c[broker.StateScheduled], Pending: c[broker.StatePending],
		Active: c[broker.StateActive], Retry: c[broker.StateRetry],
		Completed: c[broker.StateCompleted], Archived: c[broker.StateArchived],
		Canceled: c[broker.StateCanceled], Aggregating: c[broker.StateAggregating],
		Blocked:   c[broker.StateBlocked],
		Processed: q.Processed, Failed: q.Failed, Enqueued: q.Enqueued,
	}
}
