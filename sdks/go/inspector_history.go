package conveyor

import (
	"context"
	"time"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/gen/conveyor/v1/conveyorv1connect"
)

// HistoryResolution is the width of a history point.
type HistoryResolution int

const (
	// HistoryByMinute: one point per minute over the last 24 hours.
	HistoryByMinute HistoryResolution = iota
	// HistoryByDay: one point per UTC day over the last 90 days.
	HistoryByDay
)

// HistoryPoint is what a queue did in one minute or day.
type HistoryPoint struct {
	// Start is when the minute or day began.
	Start time.Time
	// Enqueued counts the tasks enqueued.
	Enqueued int64
	// Completed counts the attempts that succeeded.
	Completed int64
	// Failed counts the attempts that failed (retried or failed for good).
	Failed int64
}

// QueueHistory returns what a queue (every queue, summed, when queue is
// empty) did per minute or per day, oldest first and with no gap, up to
// the current minute or day, which is still filling. The server keeps the
// history across restarts: a day of minutes and 90 days of days. An
// unknown queue fails with ErrNotFound.
func (i *Inspector) QueueHistory(ctx context.Context, queue string, res HistoryResolution) ([]HistoryPoint, error) {
	r := conveyorv1.HistoryResolution_HISTORY_RESOLUTION_MINUTE
	if res == HistoryByDay {
		r = conveyorv1.HistoryResolution_HISTORY_RESOLUTION_DAY
	}
	msg, err := adminCall(ctx, i.admin, &conveyorv1.GetQueueHistoryRequest{Queue: queue, Resolution: r}, repeatable,
		conveyorv1connect.AdminServiceClient.GetQueueHistory)
	if err != nil {
		return nil, err
	}
	points := make([]HistoryPoint, len(msg.GetPoints()))
	for j, p := range msg.GetPoints() {
		points[j] = HistoryPoint{Start: p.GetStart().AsTime(), Enqueued: p.GetEnqueued(), Completed: p.GetCompleted(), Failed: p.GetFailed()}
	}
	return points, nil
}

// Durations are quantiles of observed durations.
type Durations struct {
	// Count is how many durations were observed.
	Count int64
	// P50 and P95 are estimated from the server's metrics histograms.
	P50, P95 time.Duration
}

// QueueStats say how far behind a queue is and how long its tasks waited
// and ran.
type QueueStats struct {
	// OldestReadyAt is when the queue's longest-waiting ready task became
	// ready; zero when none is.
	OldestReadyAt time.Time
	// Latency is how long that task has waited; zero when none is ready.
	Latency time.Duration
	// Wait is from when a task became due to its dispatch, every type.
	Wait Durations
	// Run is from dispatch to the worker's result, per attempt, by type.
	Run map[string]Durations
	// ObservedSince is when the answering server started observing: the
	// durations are its own, since then.
	ObservedSince time.Time
}

// QueueStats returns a queue's latency and its wait and run durations. An
// unknown queue fails with ErrNotFound.
func (i *Inspector) QueueStats(ctx context.Context, queue string) (*QueueStats, error) {
	msg, err := adminCall(ctx, i.admin, &conveyorv1.GetQueueStatsRequest{Queue: queue}, repeatable,
		conveyorv1connect.AdminServiceClient.GetQueueStats)
	if err != nil {
		return nil, err
	}
	st := &QueueStats{Latency: msg.GetLatency().AsDuration(), Wait: durationsOf(msg.GetWait()),
		Run: map[string]Durations{}, ObservedSince: msg.GetObservedSince().AsTime()}
	if msg.GetOldestReadyAt() != nil {
		st.OldestReadyAt = msg.GetOldestReadyAt().AsTime()
	}
	for _, t := range msg.GetTypes() {
		st.Run[t.GetType()] = durationsOf(t.GetRun())
	}
	return st, nil
}

func durationsOf(d *conveyorv1.Durations) Durations {
	return Durations{Count: d.GetCount(), P50: d.GetP50().AsDuration(), P95: d.GetP95().AsDuration()}
}
