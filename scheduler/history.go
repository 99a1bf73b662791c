package scheduler

import (
	"context"
	"log/slog"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
)

// historyRecorder samples every queue's counters into the engine's
// history (broker.HistoryKeeper) at the opening of each minute: the
// samples the dashboard's charts and `conveyor queue history` are drawn
// from.
//
// A queue's counters count from its creation, so a queue that appears
// between two rounds did all it did since the previous round: it gets a
// zero sample at that round's time, so its first minute is not lost. The
// recorder knows the previous round and the queues it sampled, loaded
// from the engine at its first round (a restart, a new leader); when the
// engine had no round (a new install, or one that predates history), the
// queues of the first are counted from then on, since what they did
// earlier has no time to go to.
type historyRecorder struct {
	b broker.Broker
	h broker.HistoryKeeper

	loaded bool
	known  map[string]bool // queues with a sample
	last   time.Time       // the previous round's time; zero: none
}

// NewHistoryRecorder returns the loop that records the queues' history, at
// each minute's opening and once at start. A round recorded twice in one
// minute changes nothing (a bucket keeps its first sample).
func NewHistoryRecorder(b broker.Broker, h broker.HistoryKeeper, now func() time.Time, log *slog.Logger) *Loop {
	r := &historyRecorder{b: b, h: h, known: map[string]bool{}}
	l := NewLoop("history", r.round, now, log)
	l.SetMaxSleep(DefaultMaxSleep)
	return l
}

func (r *historyRecorder) round(ctx context.Context, at time.Time) (time.Time, error) {
	if !r.loaded {
		if err := r.load(ctx); err != nil {
			return time.Time{}, err
		}
	}
	qs, err := r.b.Queues(ctx)
	if err != nil {
		return time.Time{}, err
	}
	samples := make([]broker.HistorySample, 0, len(qs))
	for _, q := range qs {
		if !r.known[q.Name] && !r.last.IsZero() {
			samples = append(samples, broker.HistorySample{HistoryCounters: broker.HistoryCounters{Queue: q.Name}, Bucket: r.last})
		}
		samples = append(samples, broker.HistorySample{Bucket: at,
			HistoryCounters: broker.HistoryCounters{Queue: q.Name, Enqueued: q.Enqueued, Processed: q.Processed, Failed: q.Failed}})
	}
	if err := r.h.RecordHistory(ctx, at, samples); err != nil {
		return time.Time{}, err
	}
	clear(r.known) // a queue deleted since is new if it comes back
	for _, q := range qs {
		r.known[q.Name] = true
	}
	r.last = at
	return broker.HistoryMinute.Bucket(at).Add(time.Minute), nil
}

// load learns the latest round's time and the queues it sampled.
func (r *historyRecorder) load(ctx context.Context) error {
	last, err := r.h.HistoryRound(ctx)
	if err != nil || last.IsZero() {
		r.loaded = err == nil
		return err
	}
	samples, err := r.h.History(ctx, broker.HistoryMinute, "", broker.HistoryMinute.Bucket(last))
	if err != nil {
		return err
	}
	for _, s := range samples {
		r.known[s.Queue] = true
	}
	r.last, r.loaded = last, true
	return nil
}
