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
