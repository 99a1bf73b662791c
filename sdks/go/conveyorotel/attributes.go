package conveyorotel

import "go.opentelemetry.io/otel/attribute"

// The attributes of both spans. The messaging.* keys are OpenTelemetry's
// messaging semantic conventions; the conveyor.* keys are this system's.
const (
	keySystem        = attribute.Key("messaging.system")
	keyOperationType = attribute.Key("messaging.operation.type")
	keyOperationName = attribute.Key("messaging.operation.name")
	keyDestination   = attribute.Key("messaging.destination.name")
	keyMessageID     = attribute.Key("messaging.message.id")
	keyTaskType      = attribute.Key("conveyor.task.type")
	keyTaskState     = attribute.Key("conveyor.task.state")
	keyRetried       = attribute.Key("conveyor.task.retried")
	keyAttemptID     = attribute.Key("conveyor.attempt.id")
	keyOutcome       = attribute.Key("conveyor.task.outcome")
)

// system is messaging.system's value.
var system = keySystem.String("conveyor")

// defaultQueue is the queue of a task that names none.
const defaultQueue = "default"
