package sessions

import (
	"time"

	"github.com/conveyor-dev/conveyor/broker"
)

// Metrics records what the sessions see happen, for the server's
// /metrics (which owns the series and their labels). The hub calls it
// from the sessions' goroutines, and LeaseLapsed under the broker's lock:
// it must be safe for concurrent use and must not call the broker.
type Metrics interface {
	// TaskDispatched counts one delivery of t (each member of a
	// BatchDispatch counts), sent at now.
	TaskDispatched(t *broker.Task, now time.Time)
	// LeaseLapsed counts one lease of a task of queue and typ that the
	// reaper took back; to is the state the lapse left the task in (0:
	// not known).
	LeaseLapsed(queue, typ string, to broker.State)
	// AttemptEnded counts what a worker's Result led to: the decision's
	// kind, the task's state after it, and how long the attempt ran.
	AttemptEnded(queue, typ string, kind broker.DecisionKind, to broker.State, ran time.Duration)
	// StartDecided counts one StartDecision sent (authorized or refused).
	StartDecided(authorized bool)
}
