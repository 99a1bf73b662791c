package server

import (
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/conveyor-dev/conveyor/broker"
	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
)

func ts(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

// taskInfo is the wire view of a task.
func taskInfo(t *broker.Task) *conveyorv1.TaskInfo {
	info := &conveyorv1.TaskInfo{
		Id:              t.ID,
		Queue:           t.Queue,
		Type:            t.Type,
		State:           t.State,
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
		Group:           t.Options.GetGroup(),
		ConcurrencyKey:  t.Options.GetConcurrencyKey(),
		DependsOn:       t.Options.GetDependsOn(),
		Options:         t.Options,
		ExpiresAt:       ts(t.ExpiresAt),
	}
	return info
}

// envelope is a task as dispatched to a worker.
func envelope(t *broker.Task) *conveyorv1.TaskEnvelope {
	return &conveyorv1.TaskEnvelope{
		Id:          t.ID,
		Queue:       t.Queue,
		Type:        t.Type,
		Payload:     t.Payload,
		ContentType: t.ContentType,
		Metadata:    t.Metadata,
		Options:     t.Options,
		Retried:     t.Retried,
		MaxRetry:    t.MaxRetry,
		Priority:    t.Priority,
	}
}
