package conveyor_test

import (
	"errors"
	"testing"

	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
)

// TestInspectorQueueHistory: a queue's enqueues show in its history at
// once, per minute and per day; an unknown queue is ErrNotFound.
func TestInspectorQueueHistory(t *testing.T) {
	t.Parallel()
	b := inspSetup(t)
	b.enqueue("t", conveyor.Queue("emails"))
	b.enqueue("t", conveyor.Queue("emails"))
	b.enqueue("t", conveyor.Queue("reports"))
	for _, c := range []struct {
		queue string
		res   conveyor.HistoryResolution
		want  int64
	}{{"emails", conveyor.HistoryByMinute, 2}, {"emails", conveyor.HistoryByDay, 2}, {"", conveyor.HistoryByMinute, 3}} {
		points, err := b.insp.QueueHistory(b.ctx, c.queue, c.res)
		if err != nil || len(points) == 0 {
			t.Fatalf("QueueHistory(%q, %v): %v, %d points", c.queue, c.res, err, len(points))
		}
		var enq int64
		for _, p := range points {
			enq += p.Enqueued
		}
		eq(t, "enqueued in the history of "+c.queue, enq, c.want)
		if last := points[len(points)-1]; last.Start.IsZero() || last.Enqueued != c.want {
			t.Errorf("the latest point of %q: %+v, want %d enqueued", c.queue, last, c.want)
		}
	}
	if _, err := b.insp.QueueHistory(b.ctx, "nope", conveyor.HistoryByMinute); !errors.Is(err, conveyor.ErrNotFound) {
		t.Errorf("QueueHistory of an unknown queue: %v, want ErrNotFound", err)
	}
}

// TestInspectorQueueStats: a waiting task makes a latency; an unknown
// queue is ErrNotFound.
func TestInspectorQueueStats(t *testing.T) {
	t.Parallel()
	b := inspSetup(t)
	b.enqueue("t", conveyor.Queue("slow"))
	st, err := b.insp.QueueStats(b.ctx, "slow")
	if err != nil || st.OldestReadyAt.IsZero() || st.Latency < 0 || st.ObservedSince.IsZero() || st.Wait.Count != 0 {
		t.Fatalf("QueueStats with one task waiting: %+v, %v", st, err)
	}
	if _, err := b.insp.QueueStats(b.ctx, "nope"); !errors.Is(err, conveyor.ErrNotFound) {
		t.Errorf("QueueStats of an unknown queue: %v, want ErrNotFound", err)
	}
}
