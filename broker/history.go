package broker

import (
	"context"
	"time"
)

// HistoryKeeper is implemented by an engine that keeps each queue's
// history: its counters (QueueInfo.Enqueued, Processed, Failed) sampled
// once per minute and once per day, so that charts of what a queue did
// survive a restart and show on a first view. The server's history loop
// records a sample every minute (the leader's, on an engine several
// nodes share); readers turn consecutive samples into what happened in
// between (HistoryPoints).
//
// A bucket keeps the first sample recorded in it, its opening figures:
// recording twice in one minute (a leader that changed, a kick) changes
// nothing, so the loop is safe to run twice, on any node.
type HistoryKeeper interface {
	// RecordHistory stores each sample (a queue's counters as they stood
	// at s.Bucket, any moment) as the sample of the minute and of the day
	// that hold that moment, unless that bucket has one already, and
	// drops the samples that fell out of their resolution's retention at
	// now; now becomes the latest round (HistoryRound). Returns once they
	// are durable.
	RecordHistory(ctx context.Context, now time.Time, samples []HistorySample) error
	// HistoryRound returns the now of the latest RecordHistory (zero when
	// there was none): a queue first sampled after it was made since then.
	HistoryRound(ctx context.Context) (time.Time, error)
	// History returns the samples of one resolution whose bucket starts at
	// or after since, of one queue or, when queue is empty, of every
	// queue: by queue (its name's bytes), then oldest first.
	History(ctx context.Context, res HistoryResolution, queue string, since time.Time) ([]HistorySample, error)
}

// HistoryCounters are a queue's counters at one moment.
type HistoryCounters struct {
	Queue     string
	Enqueued  int64
	Processed int64
	Failed    int64
}

// HistorySample is a queue's counters at the opening of a bucket.
type HistorySample struct {
	HistoryCounters
	// Bucket is the start of the minute or day (UTC) the sample opens;
	// recorded, the moment the counters were read.
	Bucket time.Time
}

// HistoryResolution is the width of a history bucket.
type HistoryResolution uint8

const (
	// HistoryMinute buckets are minutes, kept for a day.
	HistoryMinute HistoryResolution = 1
	// HistoryDay buckets are UTC days, kept for 90 days.
	HistoryDay HistoryResolution = 2
)

// HistoryResolutions lists every resolution, finest first.
var HistoryResolutions = []HistoryResolution{HistoryMinute, HistoryDay}

// Width is the length of one bucket.
func (r HistoryResolution) Width() time.Duration {
	if r == HistoryDay {
		return 24 * time.Hour
	}
	return time.Minute
}

// Span is how far back the resolution's points reach: a day of minutes,
// 90 days of days.
func (r HistoryResolution) Span() time.Duration {
	if r == HistoryDay {
		return 90 * 24 * time.Hour
	}
	return 24 * time.Hour
}

// Bucket is the start of the bucket that holds t, in UTC.
func (r HistoryResolution) Bucket(t time.Time) time.Time {
	return t.UTC().Truncate(r.Width())
}

// KeepFrom is the oldest bucket an engine keeps at now: the first bucket
// of the span, and the one before it, whose sample is the opening figure
// that the span's first point is measured from.
func (r HistoryResolution) KeepFrom(now time.Time) time.Time {
	return r.Bucket(now).Add(-r.Span())
}

func (r HistoryResolution) String() string {
	if r == HistoryDay {
		return "day"
	}
	return "minute"
}
