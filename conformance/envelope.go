package conformance

import (
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
)

// Envelope is the TaskEnvelope the fake dispatches: a JSON task on queue
// "default".
func Envelope(id, attempt, typ, payload string) *conveyorv1.TaskEnvelope {
	return &conveyorv1.TaskEnvelope{
		Id: id, Queue: "default", Type: typ, Payload: []byte(payload),
		ContentType: "application/json", AttemptId: attempt,
	}
}

func timestamp(t time.Time) *timestamppb.Timestamp { return timestamppb.New(t) }
