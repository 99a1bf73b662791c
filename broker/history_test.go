package broker_test

import (
	"testing"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
)

func sample(at time.Time, enq, proc, failed int64) broker.HistorySample {
	return broker.HistorySample{Bucket: at, HistoryCounters: broker.HistoryCounters{Queue: "q", Enqueued: enq, Processed: proc, Failed: failed}}
}

func TestHistoryPointsBetweenSamples(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	now := t0.Add(3*time.Minute + 20*time.Second)
	samples := []broker.HistorySample{
		sample(t0, 10, 4, 1),
		sample(t0.Add(time.Minute), 15, 8, 2),
		// 10:02 has no sample: the server was down.
		sample(t0.Add(3*time.Minute), 15, 9, 2),
	}
	live := broker.HistoryCounters{Queue: "q", Enqueued: 21, Processed: 12, Failed: 3}
	got := broker.HistoryPoints(broker.HistoryMinute, samples, live, now)
	want := []broker.HistoryPoint{
		{Bucket: t0, Enqueued: 5, Completed: 3, Failed: 1},
		{Bucket: t0.Add(time.Minute), Enqueued: 0, Completed: 1, Failed: 0},
		{Bucket: t0.Add(2 * time.Minute)},
		{Bucket: t0.Add(3 * time.Minute), Enqueued: 6, Completed: 2, Failed: 1},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d points %+v, want %d", len(got), got, len(want))
	}
	for i := range want {
		if !got[i].Bucket.Equal(want[i].Bucket) || got[i].Enqueued != want[i].Enqueued ||
			got[i].Completed != want[i].Completed || got[i].Failed != want[i].Failed {
			t.Errorf("point %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestHistoryPointsNeverSampled(t *testing.T) {
	now := time.Date(2026, 12, 5, 10, 0, 30, 0, time.UTC)
	got := broker.HistoryPoints(broker.HistoryMinute, nil, broker.HistoryCounters{Queue: "new", Enqueued: 7, Processed: 2}, now)
	if len(got) != 1 || got[0].Enqueued != 7 || got[0].Completed != 2 || !got[0].Bucket.Equal(now.Truncate(time.Minute)) {
		t.Fatalf("a queue never sampled: %+v, want one point of 7 enqueued, 2 completed at 10:00", got)
	}
}

func TestHistoryPointsReset(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)
	// The queue was deleted and made again between the day's samples.
	samples := []broker.HistorySample{sample(t0, 100, 90, 5), sample(t0.Add(24*time.Hour), 4, 3, 1)}
	got := broker.HistoryPoints(broker.HistoryDay, samples, broker.HistoryCounters{Enqueued: 6, Processed: 3, Failed: 1}, t0.Add(30*time.Hour))
	if len(got) != 2 || got[0].Enqueued != 4 || got[0].Completed != 2 || got[0].Failed != 1 || got[1].Enqueued != 2 {
		t.Fatalf("reset counters: %+v", got)
	}
}

func TestHistoryPointsSpan(t *testing.T) {
	now := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	old := now.Add(-48 * time.Hour)
	samples := []broker.HistorySample{sample(old, 0, 0, 0), sample(now.Add(-24*time.Hour), 50, 0, 0), sample(now.Add(-10*time.Minute), 55, 0, 0)}
	got := broker.HistoryPoints(broker.HistoryMinute, samples, broker.HistoryCounters{Enqueued: 60}, now)
	if len(got) != 1440 {
		t.Fatalf("a day of minutes is %d points, want 1440", len(got))
	}
	if !got[0].Bucket.Equal(now.Add(-24*time.Hour + time.Minute)) {
		t.Errorf("first point at %v", got[0].Bucket)
	}
	var enq int64
	for _, p := range got {
		enq += p.Enqueued
	}
	// The sample 24 h ago is the bucket before the span: what came after
	// it until the next sample belongs to that bucket, not to the span.
	if enq != 5 || got[len(got)-11].Enqueued != 5 {
		t.Errorf("enqueued over the span: %d, want 5, 10 minutes ago", enq)
	}
}

func TestSumHistory(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	a := []broker.HistoryPoint{{Bucket: t0, Enqueued: 1}, {Bucket: t0.Add(time.Minute), Enqueued: 2}}
	b := []broker.HistoryPoint{{Bucket: t0.Add(time.Minute), Enqueued: 10, Failed: 1}}
	got := broker.SumHistory(broker.HistoryMinute, a, nil, b)
	if len(got) != 2 || got[0].Enqueued != 1 || got[1].Enqueued != 12 || got[1].Failed != 1 {
		t.Fatalf("sum: %+v", got)
	}
	if broker.SumHistory(broker.HistoryMinute) != nil {
		t.Errorf("the sum of nothing is not empty")
	}
}

func TestHistoryBuckets(t *testing.T) {
	at := time.Date(2026, 12, 5, 23, 59, 59, 0, time.FixedZone("x", 3600))
	if got := broker.HistoryDay.Bucket(at); !got.Equal(time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("day bucket of %v: %v", at, got)
	}
	if got := broker.HistoryMinute.KeepFrom(at); !got.Equal(broker.HistoryMinute.Bucket(at).Add(-24 * time.Hour)) {
		t.Errorf("minute KeepFrom: %v", got)
	}
}
