package brokertest

import (
	"testing"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
)

func historyCases() []testCase {
	return []testCase{
		{name: "FirstSampleOfABucketKept", env: testHistoryFirstSample},
		{name: "Retention", fn: testHistoryRetention},
		{name: "ForgottenWithTheQueue", fn: testHistoryDeletedQueue},
	}
}

func historyKeeper(t *testing.T, b broker.Broker) broker.HistoryKeeper {
	t.Helper()
	h, ok := b.(broker.HistoryKeeper)
	if !ok {
		t.Fatalf("%T does not implement broker.HistoryKeeper", b)
	}
	return h
}

func recordHistory(t *testing.T, b broker.Broker, at time.Time, qs ...broker.HistoryCounters) {
	t.Helper()
	samples := make([]broker.HistorySample, len(qs))
	for i, q := range qs {
		samples[i] = broker.HistorySample{HistoryCounters: q, Bucket: at}
	}
	if err := historyKeeper(t, b).RecordHistory(t.Context(), at, samples); err != nil {
		t.Fatalf("RecordHistory at %v: %v", at, err)
	}
}

func readHistory(t *testing.T, b broker.Broker, res broker.HistoryResolution, queue string, since time.Time) []broker.HistorySample {
	t.Helper()
	s, err := historyKeeper(t, b).History(t.Context(), res, queue, since)
	if err != nil {
		t.Fatalf("History(%v, %q): %v", res, queue, err)
	}
	return s
}

// testHistoryFirstSample: a bucket keeps the first sample recorded in it,
// of each resolution, across a restart; samples come by queue (in byte
// order), oldest first; one queue's read leaves the others out.
func testHistoryFirstSample(t *testing.T, e *Env) {
	t0 := broker.HistoryDay.Bucket(T0).Add(time.Hour)
	if round, err := historyKeeper(t, e.B).HistoryRound(t.Context()); err != nil || !round.IsZero() {
		t.Fatalf("HistoryRound of a new store = %v, %v; want none", round, err)
	}
	recordHistory(t, e.B, t0.Add(10*time.Second), broker.HistoryCounters{Queue: "B", Enqueued: 1},
		broker.HistoryCounters{Queue: "a", Enqueued: 5, Processed: 3, Failed: 1})
	if round, err := historyKeeper(t, e.B).HistoryRound(t.Context()); err != nil || !round.Equal(t0.Add(10*time.Second)) {
		t.Fatalf("HistoryRound after one round = %v, %v; want %v", round, err, t0.Add(10*time.Second))
	}
	recordHistory(t, e.B, t0.Add(50*time.Second), broker.HistoryCounters{Queue: "a", Enqueued: 9})
	e.Reopen()
	if round, err := historyKeeper(t, e.B).HistoryRound(t.Context()); err != nil || !round.Equal(t0.Add(50*time.Second)) {
		t.Fatalf("HistoryRound after a restart = %v, %v; want %v", round, err, t0.Add(50*time.Second))
	}
	recordHistory(t, e.B, t0.Add(70*time.Second), broker.HistoryCounters{Queue: "a", Enqueued: 12, Processed: 4})

	got := readHistory(t, e.B, broker.HistoryMinute, "", time.Time{})
	// Queues in the order of their names' bytes ("B" before "a"), whatever
	// the order of the store's language.
	want := []broker.HistorySample{
		{Bucket: t0, HistoryCounters: broker.HistoryCounters{Queue: "B", Enqueued: 1}},
		{Bucket: t0, HistoryCounters: broker.HistoryCounters{Queue: "a", Enqueued: 5, Processed: 3, Failed: 1}},
		{Bucket: t0.Add(time.Minute), HistoryCounters: broker.HistoryCounters{Queue: "a", Enqueued: 12, Processed: 4}},
	}
	requireSamples(t, "minutes of every queue", got, want)
	requireSamples(t, "minutes of a since its second", readHistory(t, e.B, broker.HistoryMinute, "a", t0.Add(time.Minute)), want[2:3])
	day := broker.HistoryDay.Bucket(t0)
	requireSamples(t, "days of a", readHistory(t, e.B, broker.HistoryDay, "a", time.Time{}),
		[]broker.HistorySample{{Bucket: day, HistoryCounters: broker.HistoryCounters{Queue: "a", Enqueued: 5, Processed: 3, Failed: 1}}})
}

// testHistoryRetention: a day of minutes and 90 days of days are kept,
// with the bucket before each span (the opening figure of its first
// point); older samples are dropped when later ones are recorded.
func testHistoryRetention(t *testing.T, b broker.Broker) {
	start := broker.HistoryDay.Bucket(T0)
	q := broker.HistoryCounters{Queue: "q"}
	recordHistory(t, b, start, q)
	recordHistory(t, b, start.Add(24*time.Hour), q)
	recordHistory(t, b, start.Add(24*time.Hour+time.Minute), q)
	if got := readHistory(t, b, broker.HistoryMinute, "q", time.Time{}); len(got) != 2 || !got[0].Bucket.Equal(start.Add(24*time.Hour)) {
		t.Fatalf("minutes after a day: %+v, want the last two", got)
	}
	recordHistory(t, b, start.Add(91*24*time.Hour), q)
	got := readHistory(t, b, broker.HistoryDay, "q", time.Time{})
	if len(got) != 2 || !got[0].Bucket.Equal(start.Add(24*time.Hour)) || !got[1].Bucket.Equal(start.Add(91*24*time.Hour)) {
		t.Fatalf("days after 91 days: %+v, want day 1 and day 91", got)
	}
}

// testHistoryDeletedQueue: deleting a queue forgets its history.
func testHistoryDeletedQueue(t *testing.T, b broker.Broker) {
	if _, err := b.SetQueuePaused(t.Context(), "gone", true); err != nil {
		t.Fatal(err)
	}
	recordHistory(t, b, T0, broker.HistoryCounters{Queue: "gone", Enqueued: 3}, broker.HistoryCounters{Queue: "kept"})
	if err := b.DeleteQueue(t.Context(), "gone"); err != nil {
		t.Fatal(err)
	}
	for _, res := range broker.HistoryResolutions {
		got := readHistory(t, b, res, "", time.Time{})
		if len(got) != 1 || got[0].Queue != "kept" {
			t.Errorf("%v history after deleting a queue: %+v", res, got)
		}
	}
}

func requireSamples(t *testing.T, what string, got, want []broker.HistorySample) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: got %+v, want %+v", what, got, want)
	}
	for i := range want {
		if !got[i].Bucket.Equal(want[i].Bucket) || got[i].HistoryCounters != want[i].HistoryCounters {
			t.Errorf("%s [%d]: got %+v, want %+v", what, i, got[i], want[i])
		}
	}
}
