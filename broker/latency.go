package broker

import (
	"context"
	"time"
)

// LatencyReporter is implemented by an engine that can tell how long a
// queue's ready work has waited: the queue's latency, the first figure an
// operator reads to know whether its workers keep up.
type LatencyReporter interface {
	// OldestReady returns when the queue's longest-waiting ready task
	// (PENDING, not held back by its concurrency key) became ready, or the
	// zero time when none is. An engine that does not know when a task
	// became ready (after a restart) may give the time it was last due,
	// never later than now.
	OldestReady(ctx context.Context, queue string, now time.Time) (time.Time, error)
}
