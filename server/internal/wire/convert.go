package wire

import (
	"google.golang.org/protobuf/proto"

	"github.com/conveyor-dev/conveyor/broker"
	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
)

// BrokerOutcome is a worker's outcome in the contract's terms: the
// contract numbers its outcomes as the wire does, so it is a cast.
func BrokerOutcome(o conveyorv1.TaskOutcome) broker.Outcome { return broker.Outcome(o) }

// DecodeOptions reads the producer's options the broker kept as bytes; nil
// when there are none (or, never expected, when they do not decode).
func DecodeOptions(b []byte) *conveyorv1.TaskOptions {
	if len(b) == 0 {
		return nil
	}
	o := &conveyorv1.TaskOptions{}
	if proto.Unmarshal(b, o) != nil {
		return nil
	}
	return o
}

// Envelope is a task as dispatched to a worker.
func Envelope(t *broker.Task) *conveyorv1.TaskEnvelope {
	return &conveyorv1.TaskEnvelope{
		Id:          t.ID,
		Queue:       t.Queue,
		Type:        t.Type,
		Payload:     t.Payload,
		ContentType: t.ContentType,
		Metadata:    t.Metadata,
		Options:     DecodeOptions(t.Options),
		Retried:     t.Retried,
		MaxRetry:    t.MaxRetry,
		Priority:    t.Priority,
	}
}
