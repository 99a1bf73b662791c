package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/conveyor-dev/conveyor/broker"
	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/gen/conveyor/v1/conveyorv1connect"
)

// maxScrapeBytes is the worst case docs/operations.md states for one
// scrape: every label cap full, every label value maxLabelBytes long and
// made of characters the exposition escapes.
const maxScrapeBytes = 32 << 20

// TestMetricsScrapeBounded fills every label cap of a running server with
// the longest label values (type and cron labels of quotes, which the
// exposition escapes to twice their size), every series of each, and as
// many names again past the caps, some of them 1 KiB long. The scrape
// stays within maxScrapeBytes; no label value passes maxLabelBytes; the
// queue and cron labels stay within their caps, in the series counted as
// things happen and in those read from the engine at scrape time; and the
// persisted counters of the folded queues are summed under otherLabel.
func TestMetricsScrapeBounded(t *testing.T) {
	t.Parallel()
	s := startInternal(t)
	m := s.metrics
	m.cronMu.Lock()
	m.cronExists = func(string) bool { return true }
	m.cronMu.Unlock()

	// Queues: the cap's worth of names of maxLabelBytes, then more, then
	// some longer than the bound. One task each, by a real enqueue.
	var queues []string
	for i := range maxQueueLabels + 50 {
		queues = append(queues, padded(fmt.Sprintf("q%04d", i), "a", maxLabelBytes))
	}
	for i := range 20 {
		queues = append(queues, padded(fmt.Sprintf("long%02d", i), "a", MaxNameBytes))
	}
	enqueueEach(t, s, queues)

	// Types: the cap's worth of pairs, then more, each with every per-type
	// series; types past the length bound are 1 KiB.
	now := time.Now()
	for i := range maxTypeLabels + 600 {
		typ := padded(fmt.Sprintf("t%05d", i), `"`, maxLabelBytes)
		if i >= maxTypeLabels {
			typ = padded(fmt.Sprintf("t%05d", i), `"`, MaxNameBytes)
		}
		everySeries(m, &broker.Task{Queue: queues[i%len(queues)], Type: typ, EnqueuedAt: now.Add(-time.Second)}, now)
	}
	for i := range maxCronLabels + 100 {
		id := padded(fmt.Sprintf("c%05d", i), `"`, maxLabelBytes)
		for _, result := range []string{"enqueued", "refused", "skipped"} {
			m.cronFired(id, result, nil, nil)
		}
	}

	body := scrapeInternal(t, s)
	t.Logf("the scrape: %d bytes (%.1f MiB)", len(body), float64(len(body))/(1<<20))
	if len(body) > maxScrapeBytes {
		t.Errorf("the scrape is %d bytes, past the stated bound %d", len(body), maxScrapeBytes)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string]map[string]bool{"queue": {}, "type": {}, "cron": {}}
	for _, f := range families {
		for _, sm := range f.GetMetric() {
			for _, l := range sm.GetLabel() {
				if seen, ok := labels[l.GetName()]; ok {
					seen[l.GetValue()] = true
					if len(l.GetValue()) > maxLabelBytes {
						t.Fatalf("%s has a %s label of %d bytes", f.GetName(), l.GetName(), len(l.GetValue()))
					}
				}
			}
		}
	}
	if n := len(labels["queue"]); n > maxQueueLabels+1 || !labels["queue"][otherLabel] {
		t.Errorf("%d queue label values (_other among them: %v), want at most %d", n, labels["queue"][otherLabel], maxQueueLabels+1)
	}
	if n := len(labels["cron"]); n > maxCronLabels+1 || !labels["cron"][otherLabel] {
		t.Errorf("%d cron label values, want at most %d", n, maxCronLabels+1)
	}
	for _, name := range []string{"conveyor_queue_enqueued_total", "conveyor_queue_tasks", "conveyor_queue_paused", "conveyor_task_wait_seconds"} {
		if n := len(queueValues(families[name])); n > maxQueueLabels+1 {
			t.Errorf("%s has %d queue label values, want at most %d", name, n, maxQueueLabels+1)
		}
	}
	// Every queue holds one task: the folded ones are summed.
	if got := queueValues(families["conveyor_queue_enqueued_total"])[otherLabel]; got != float64(len(queues)-maxQueueLabels) {
		t.Errorf("conveyor_queue_enqueued_total{queue=%q} is %v, want %d", otherLabel, got, len(queues)-maxQueueLabels)
	}
}

// TestMetricsQueueLabelFreedByDelete: a queue DeleteQueue forgot gives its
// place under the queue cap to the next queue.
func TestMetricsQueueLabelFreedByDelete(t *testing.T) {
	t.Parallel()
	m := newMetrics()
	for i := range maxQueueLabels {
		if got := m.queueLabel(fmt.Sprint("q", i)); got != fmt.Sprint("q", i) {
			t.Fatalf("queue q%d is labelled %q", i, got)
		}
	}
	if got := m.queueLabel("late"); got != otherLabel {
		t.Errorf("a queue past the cap is labelled %q", got)
	}
	m.queueDeleted("q0")
	m.queueDeleted("late") // folded: nothing of its own to free
	if got := m.queueLabel("later"); got != "later" {
		t.Errorf("a queue after a delete is labelled %q", got)
	}
	if got := m.queueLabel(strings.Repeat("q", maxLabelBytes+1)); got != otherLabel {
		t.Errorf("a queue name past maxLabelBytes is labelled %q", got)
	}
}

// everySeries records every per-type and per-queue series of task t.
func everySeries(m *metrics, t *broker.Task, now time.Time) {
	m.enqueuedTask(t)
	m.dispatchedTask(t, now)
	for _, end := range []struct {
		kind broker.DecisionKind
		to   broker.State
	}{
		{broker.DecideComplete, broker.StateCompleted}, {broker.DecideRetry, broker.StateRetry},
		{broker.DecideArchive, broker.StateArchived}, {broker.DecideCancel, broker.StateCanceled},
		{broker.DecideRelease, broker.StatePending},
	} {
		m.attemptEnded(t.Queue, t.Type, end.kind, end.to, time.Second)
	}
	m.leaseLapsed(t.Queue, t.Type, broker.StateRetry)
}

// padded is prefix followed by pad up to n bytes.
func padded(prefix, pad string, n int) string {
	return prefix + strings.Repeat(pad, n-len(prefix))
}

// queueValues is the value of each series of f by its queue label (a
// histogram's sample count).
func queueValues(f *dto.MetricFamily) map[string]float64 {
	out := map[string]float64{}
	for _, sm := range f.GetMetric() {
		for _, l := range sm.GetLabel() {
			if l.GetName() == "queue" {
				out[l.GetValue()] = sm.GetCounter().GetValue() + sm.GetGauge().GetValue() + float64(sm.GetHistogram().GetSampleCount())
			}
		}
	}
	return out
}

// startInternal starts a server on loopback with its store in a temporary
// directory, and stops it at cleanup.
func startInternal(t *testing.T) *Server {
	t.Helper()
	s, err := New(Config{Listen: "127.0.0.1:0", DataDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := s.Stop(ctx); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	return s
}

// enqueueEach enqueues one task into each queue, through the Connect
// protocol over HTTP/1.1.
func enqueueEach(t *testing.T, s *Server, queues []string) {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(hc.CloseIdleConnections)
	tasks := conveyorv1connect.NewTaskServiceClient(hc, s.URL())
	for lo := 0; lo < len(queues); lo += MaxBatchItems {
		req := &conveyorv1.EnqueueBatchRequest{Brief: true}
		for _, q := range queues[lo:min(lo+MaxBatchItems, len(queues))] {
			// A type past the bound: the pairs below fill the type cap.
			req.Items = append(req.Items, &conveyorv1.EnqueueRequest{Queue: q, Type: padded("t", "t", MaxNameBytes)})
		}
		res, err := tasks.EnqueueBatch(context.Background(), connect.NewRequest(req))
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res.Msg.GetResults() {
			if r.GetError() != "" {
				t.Fatalf("enqueue: %s", r.GetError())
			}
		}
	}
}

// scrapeInternal is s's /metrics body.
func scrapeInternal(t *testing.T, s *Server) string {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(hc.CloseIdleConnections)
	res, err := hc.Get(s.URL() + MetricsPath)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = res.Body.Close() }()
	b, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %d, %v", res.StatusCode, err)
	}
	return string(b)
}
