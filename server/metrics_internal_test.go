package server

import (
	"fmt"
	"testing"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
)

// TestMetricsTypeLabelCap: the first maxTypeLabels (queue, type) pairs get
// series of their own, later ones count under otherLabel, and the series
// cache holds only the former.
func TestMetricsTypeLabelCap(t *testing.T) {
	t.Parallel()
	m := newMetrics()
	const extra = 5
	for i := range maxTypeLabels + extra {
		task := &broker.Task{Queue: "q", Type: fmt.Sprintf("t%d", i)}
		m.enqueuedTask(task)
		m.enqueuedTask(task) // a second time, from the cache
	}
	counts := map[string]float64{}
	families, err := m.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "conveyor_tasks_enqueued_total" {
			continue
		}
		for _, s := range f.GetMetric() {
			for _, l := range s.GetLabel() {
				if l.GetName() == "type" {
					counts[l.GetValue()] = s.GetCounter().GetValue()
				}
			}
		}
	}
	if len(counts) != maxTypeLabels+1 || counts[otherLabel] != 2*extra || counts["t7"] != 2 {
		t.Errorf("%d enqueued series, %q counted %v, t7 %v; want %d series, %d and 2",
			len(counts), otherLabel, counts[otherLabel], counts["t7"], maxTypeLabels+1, 2*extra)
	}
	if len(m.series) != maxTypeLabels {
		t.Errorf("%d series cached, want %d", len(m.series), maxTypeLabels)
	}
}

// BenchmarkMetricsPerTask measures what the per-task metrics cost one task
// on the hot path: its enqueue, its dispatch and its worker's Result, for
// tasks spread over ten types of one queue.
func BenchmarkMetricsPerTask(b *testing.B) {
	m := newMetrics()
	now := time.Now()
	tasks := make([]*broker.Task, 10)
	for i := range tasks {
		tasks[i] = &broker.Task{Queue: "q", Type: fmt.Sprintf("t%d", i), EnqueuedAt: now.Add(-time.Millisecond)}
	}
	i := 0
	for b.Loop() {
		t := tasks[i%len(tasks)]
		i++
		m.enqueuedTask(t)
		m.dispatchedTask(t, now)
		m.attemptEnded(t.Queue, t.Type, broker.DecideComplete, broker.StateCompleted, time.Millisecond)
	}
}
