package server_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/oklog/ulid/v2"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/conveyor-dev/conveyor/broker"
	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

// scrape fetches /metrics and parses it with Prometheus' own text parser.
func scrape(t *testing.T, s *servertest.Server) map[string]*dto.MetricFamily {
	t.Helper()
	res, err := http.Get(s.URL() + server.MetricsPath)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = res.Body.Close() }()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: HTTP %d", res.StatusCode)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(res.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return families
}

// value is the value of the series of family name whose labels include
// every label in want ("k=v" pairs); -1 when there is none.
func value(families map[string]*dto.MetricFamily, name string, want ...string) float64 {
	f, ok := families[name]
	if !ok {
		return -1
	}
next:
	for _, m := range f.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		for _, kv := range want {
			k, v, _ := strings.Cut(kv, "=")
			if labels[k] != v {
				continue next
			}
		}
		switch {
		case m.GetCounter() != nil:
			return m.GetCounter().GetValue()
		case m.GetGauge() != nil:
			return m.GetGauge().GetValue()
		case m.GetHistogram() != nil:
			return float64(m.GetHistogram().GetSampleCount())
		}
	}
	return -1
}

// TestMetricsCountWhatHappened drives tasks through a raw worker to each
// outcome and checks the scrape says exactly that: per-type counters,
// queue depths per state, histograms, sessions; and that every metric is
// named conveyor_*.
func TestMetricsCountWhatHappened(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	tasks := taskClient(t, s, servertest.GRPC)
	for _, typ := range []string{"ok", "again", "fatal"} {
		if _, err := tasks.Enqueue(context.Background(), connect.NewRequest(&conveyorv1.EnqueueRequest{Queue: "m", Type: typ,
			Options: &conveyorv1.TaskOptions{MaxRetry: 3}})); err != nil {
			t.Fatal(err)
		}
	}
	enqueueN(t, tasks, "m", "bulk", 5)
	if _, err := tasks.Enqueue(context.Background(), connect.NewRequest(&conveyorv1.EnqueueRequest{Queue: "m", Type: "later",
		Options: &conveyorv1.TaskOptions{ProcessIn: dur(time.Hour)}})); err != nil {
		t.Fatal(err)
	}
	w, _, err := openSession(t, s, servertest.GRPC, &conveyorv1.Hello{Queues: map[string]int32{"m": 1}, Concurrency: 8})
	if err != nil {
		t.Fatal(err)
	}
	outcome := map[string]conveyorv1.TaskOutcome{"ok": conveyorv1.TaskOutcome_TASK_OUTCOME_SUCCESS,
		"again": conveyorv1.TaskOutcome_TASK_OUTCOME_RETRY, "fatal": conveyorv1.TaskOutcome_TASK_OUTCOME_SKIP_RETRY,
		"bulk": conveyorv1.TaskOutcome_TASK_OUTCOME_RELEASED}
	answered := 0
	for answered < 3 {
		d := w.next(10 * time.Second).GetDispatch()
		if d == nil {
			continue
		}
		typ := d.GetTask().GetType()
		if typ == "bulk" {
			continue // held: it shows as in flight
		}
		w.send(&conveyorv1.WorkerMessage{Frame: &conveyorv1.WorkerMessage_Result{Result: &conveyorv1.Result{
			TaskId: d.GetTask().GetId(), AttemptId: d.GetAttemptId(), Outcome: outcome[typ], ErrorMsg: "boom"}}})
		answered++
	}
	servertest.Eventually(t, 10*time.Second, "the three results applied", func() bool {
		f := scrape(t, s)
		return value(f, "conveyor_queue_tasks", "queue=m", "state=completed") == 1 &&
			value(f, "conveyor_queue_tasks", "queue=m", "state=archived") == 1
	})
	f := scrape(t, s)
	checks := []struct {
		name   string
		labels []string
		want   float64
	}{
		{"conveyor_tasks_enqueued_total", []string{"queue=m", "type=ok"}, 1},
		{"conveyor_tasks_enqueued_total", []string{"queue=m", "type=bulk"}, 5},
		{"conveyor_tasks_dispatched_total", []string{"queue=m", "type=bulk"}, 5},
		{"conveyor_tasks_completed_total", []string{"queue=m", "type=ok"}, 1},
		{"conveyor_tasks_retried_total", []string{"queue=m", "type=again"}, 1},
		{"conveyor_tasks_archived_total", []string{"queue=m", "type=fatal"}, 1},
		{"conveyor_task_run_seconds", []string{"queue=m", "type=ok"}, 1},
		{"conveyor_task_wait_seconds", []string{"queue=m"}, 8},
		{"conveyor_queue_tasks", []string{"queue=m", "state=active"}, 5},
		{"conveyor_queue_tasks", []string{"queue=m", "state=retry"}, 1},
		{"conveyor_queue_tasks", []string{"queue=m", "state=scheduled"}, 1},
		{"conveyor_queue_enqueued_total", []string{"queue=m"}, 9},
		{"conveyor_queue_processed_total", []string{"queue=m"}, 3},
		{"conveyor_queue_failed_total", []string{"queue=m"}, 2},
		{"conveyor_queue_expired_total", []string{"queue=m"}, 0},
		{"conveyor_queue_paused", []string{"queue=m"}, 0},
		{"conveyor_sessions", nil, 1},
		{"conveyor_session_slots", nil, 8},
		{"conveyor_tasks_in_flight", nil, 5},
		{"conveyor_storage_healthy", nil, 1},
		{"conveyor_build_info", []string{"engine=" + engineName()}, 1},
		{"conveyor_results_dropped_total", []string{"reason=late"}, 0},
	}
	for _, c := range checks {
		if got := value(f, c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if value(f, "conveyor_go_goroutines") <= 0 {
		t.Errorf("runtime gauges missing")
	}
	if servertest.Engine() == servertest.EngineBolt { // the embedded engine's group commit and file
		if n := value(f, "conveyor_commit_ops"); n < 1 {
			t.Errorf("conveyor_commit_ops observed %v commits", n)
		}
		if n := value(f, "conveyor_commit_seconds"); n < 1 {
			t.Errorf("conveyor_commit_seconds observed %v commits", n)
		}
		if value(f, "conveyor_storage_file_bytes") <= 0 {
			t.Errorf("storage gauges missing")
		}
	}
	for name := range f {
		if !strings.HasPrefix(name, "conveyor_") {
			t.Errorf("metric %s is not named conveyor_*", name)
		}
	}
}

// TestMetricsCountOnlyNewTxItems: an EnqueueTx item whose task_id names a
// task already (stored before, or an earlier item of the request) is a
// no-op, and conveyor_tasks_enqueued_total does not count it.
func TestMetricsCountOnlyNewTxItems(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	tasks := taskClient(t, s, servertest.GRPC)
	item := func(id string) *conveyorv1.EnqueueRequest {
		return &conveyorv1.EnqueueRequest{TaskId: id, Queue: "tx", Type: "t"}
	}
	x, y := ulid.Make().String(), ulid.Make().String()
	for _, items := range [][]*conveyorv1.EnqueueRequest{
		{item(x)},
		{item(x), item(y), item(y)}, // a retry of x, a new y and its repeat
	} {
		if _, err := tasks.EnqueueTx(context.Background(), connect.NewRequest(&conveyorv1.EnqueueTxRequest{Items: items})); err != nil {
			t.Fatal(err)
		}
	}
	f := scrape(t, s)
	if got := value(f, "conveyor_tasks_enqueued_total", "queue=tx", "type=t"); got != 2 {
		t.Errorf("conveyor_tasks_enqueued_total = %v, want the 2 tasks stored", got)
	}
	if got := value(f, "conveyor_queue_enqueued_total", "queue=tx"); got != 2 {
		t.Errorf("conveyor_queue_enqueued_total = %v, want 2", got)
	}
}

// TestMetricsCountExpired: a task whose expiry passes while it waits
// (no worker serves its queue) is counted in conveyor_queue_expired_total.
func TestMetricsCountExpired(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	tasks := taskClient(t, s, servertest.GRPC)
	for _, o := range []*conveyorv1.TaskOptions{{ExpiresIn: dur(time.Millisecond)}, {}} {
		if _, err := tasks.Enqueue(context.Background(), connect.NewRequest(&conveyorv1.EnqueueRequest{Queue: "exp", Type: "t", Options: o})); err != nil {
			t.Fatal(err)
		}
	}
	servertest.Eventually(t, 10*time.Second, "the task archived for its expiry", func() bool {
		return value(scrape(t, s), "conveyor_queue_tasks", "queue=exp", "state=archived") == 1
	})
	f := scrape(t, s)
	if got := value(f, "conveyor_queue_expired_total", "queue=exp"); got != 1 {
		t.Fatalf("conveyor_queue_expired_total = %v, want 1", got)
	}
	if got := value(f, "conveyor_queue_tasks", "queue=exp", "state=pending"); got != 1 {
		t.Fatalf("pending = %v, want the task without an expiry", got)
	}
}

// TestMetricsCountCronFires checks the cron counter and that a fired task
// counts as enqueued.
func TestMetricsCountCronFires(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	if _, err := adminClient(t, s).CreateCron(context.Background(), connect.NewRequest(&conveyorv1.CreateCronRequest{
		Entry: &conveyorv1.CronEntry{Id: "beat", Spec: "@every 1s", Queue: "beats", Type: "beat"}})); err != nil {
		t.Fatal(err)
	}
	servertest.Eventually(t, 20*time.Second, "a cron fire counted", func() bool {
		return value(scrape(t, s), "conveyor_cron_fires_total", "cron=beat", "result=enqueued") >= 1
	})
	f := scrape(t, s)
	if fires, enq := value(f, "conveyor_cron_fires_total", "cron=beat", "result=enqueued"),
		value(f, "conveyor_tasks_enqueued_total", "queue=beats", "type=beat"); enq < 1 || enq > fires+1 {
		t.Fatalf("cron fires %v, enqueued %v: each fire is one enqueue", fires, enq)
	}
	// A deleted entry's series go with it: entries come and go over a
	// server's life, and their series would pile up.
	if _, err := adminClient(t, s).DeleteCron(context.Background(), connect.NewRequest(&conveyorv1.DeleteCronRequest{Id: "beat"})); err != nil {
		t.Fatal(err)
	}
	requireNoCronSeries(t, s, "beat")
}

func requireNoCronSeries(t *testing.T, s *servertest.Server, id string) {
	t.Helper()
	for _, m := range scrape(t, s)["conveyor_cron_fires_total"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "cron" && l.GetValue() == id {
				t.Errorf("the deleted entry's series is still exported: %v", m.GetLabel())
			}
		}
	}
}

// lateFireBroker runs afterFire once, right after the first cron fire is
// applied and before the cron loop counts it.
type lateFireBroker struct {
	broker.Broker
	once      sync.Once
	afterFire func()
}

func (l *lateFireBroker) FireCron(ctx context.Context, f broker.CronFire) (*broker.Task, error) {
	task, err := l.Broker.FireCron(ctx, f)
	if err == nil && task != nil {
		l.once.Do(l.afterFire)
	}
	return task, err
}

// TestMetricsLateFireOfADeletedCron: a fire applied just before its
// entry's DeleteCron is counted after the delete dropped the entry's
// series; the count must not bring them back for an entry that is gone.
func TestMetricsLateFireOfADeletedCron(t *testing.T) {
	t.Parallel()
	lb := &lateFireBroker{}
	s := startWrapped(t, server.Config{}, func(b broker.Broker) broker.Broker { lb.Broker = b; return lb })
	admin := adminClient(t, s)
	lb.afterFire = func() {
		if _, err := admin.DeleteCron(context.Background(), connect.NewRequest(&conveyorv1.DeleteCronRequest{Id: "late"})); err != nil {
			t.Errorf("DeleteCron: %v", err)
		}
	}
	if _, err := admin.CreateCron(context.Background(), connect.NewRequest(&conveyorv1.CreateCronRequest{
		Entry: &conveyorv1.CronEntry{Id: "late", Spec: "@every 1s", Queue: "late", Type: "beat"}})); err != nil {
		t.Fatal(err)
	}
	// The fired task is counted after the fire's own count (or its
	// absence): once it shows, the fire has been counted or dropped.
	servertest.Eventually(t, 20*time.Second, "the fired task counted", func() bool {
		return value(scrape(t, s), "conveyor_tasks_enqueued_total", "queue=late", "type=beat") >= 1
	})
	requireNoCronSeries(t, s, "late")
}

// gaveUpDeleteBroker deletes cron entries for a caller that has already
// given up: the entry is gone, and the call answers canceled.
type gaveUpDeleteBroker struct{ broker.Broker }

func (g gaveUpDeleteBroker) DeleteCron(ctx context.Context, id string) error {
	gone, cancel := context.WithCancel(ctx)
	cancel()
	return g.Broker.DeleteCron(gone, id)
}

// TestMetricsCronDeleteCallerGaveUp: a DeleteCron whose caller gave up
// while the delete's commit was pending deleted the entry all the same, so
// its series must go too.
func TestMetricsCronDeleteCallerGaveUp(t *testing.T) {
	t.Parallel()
	s := startWrapped(t, server.Config{}, func(b broker.Broker) broker.Broker { return gaveUpDeleteBroker{b} })
	admin := adminClient(t, s)
	if _, err := admin.CreateCron(context.Background(), connect.NewRequest(&conveyorv1.CreateCronRequest{
		Entry: &conveyorv1.CronEntry{Id: "quit", Spec: "@every 1s", Queue: "quit", Type: "beat"}})); err != nil {
		t.Fatal(err)
	}
	servertest.Eventually(t, 20*time.Second, "a cron fire counted", func() bool {
		return value(scrape(t, s), "conveyor_cron_fires_total", "cron=quit", "result=enqueued") >= 1
	})
	_, err := admin.DeleteCron(context.Background(), connect.NewRequest(&conveyorv1.DeleteCronRequest{Id: "quit"}))
	if connect.CodeOf(err) != connect.CodeCanceled {
		t.Fatalf("DeleteCron for a caller that gave up: %v; want canceled", err)
	}
	if _, err := admin.GetCron(context.Background(), connect.NewRequest(&conveyorv1.GetCronRequest{Id: "quit"})); connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("GetCron after the delete: %v; want not_found", err)
	}
	requireNoCronSeries(t, s, "quit")
}

// TestMetricsRetryDueAtOnce: a RETRY whose backoff is zero makes the task
// PENDING at once rather than RETRY; it is still a failed attempt that will
// be retried, counted in conveyor_tasks_retried_total with its run time,
// not as a release.
func TestMetricsRetryDueAtOnce(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{Backoff: func(*broker.RetryPolicy, int32) time.Duration { return 0 }})
	tasks := taskClient(t, s, servertest.GRPC)
	if _, err := tasks.Enqueue(context.Background(), connect.NewRequest(&conveyorv1.EnqueueRequest{Queue: "now", Type: "again",
		Options: &conveyorv1.TaskOptions{MaxRetry: 3}})); err != nil {
		t.Fatal(err)
	}
	w, _, err := openSession(t, s, servertest.GRPC, &conveyorv1.Hello{Queues: map[string]int32{"now": 1}, Concurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	d := w.next(10 * time.Second).GetDispatch()
	w.send(&conveyorv1.WorkerMessage{Frame: &conveyorv1.WorkerMessage_Result{Result: &conveyorv1.Result{
		TaskId: d.GetTask().GetId(), AttemptId: d.GetAttemptId(), Outcome: conveyorv1.TaskOutcome_TASK_OUTCOME_RETRY, ErrorMsg: "boom"}}})
	servertest.Eventually(t, 10*time.Second, "the result applied", func() bool {
		return value(scrape(t, s), "conveyor_queue_failed_total", "queue=now") == 1
	})
	f := scrape(t, s)
	for _, c := range []struct {
		name string
		want float64
	}{{"conveyor_tasks_retried_total", 1}, {"conveyor_tasks_released_total", -1}, {"conveyor_task_run_seconds", 1}} {
		if got := value(f, c.name, "queue=now", "type=again"); got != c.want {
			t.Errorf("%s = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestMetricsReleaseOfAnExpiredTask: a task handed back unrun (RELEASED)
// after its expiry passed is archived for that expiry, which
// conveyor_queue_expired_total counts; the attempt is a release, not a
// worker failing the task for good.
func TestMetricsReleaseOfAnExpiredTask(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	tasks := taskClient(t, s, servertest.GRPC)
	res, err := tasks.Enqueue(context.Background(), connect.NewRequest(&conveyorv1.EnqueueRequest{Queue: "gone", Type: "late",
		Options: &conveyorv1.TaskOptions{ExpiresIn: dur(time.Second)}}))
	if err != nil {
		t.Fatal(err)
	}
	w, _, err := openSession(t, s, servertest.GRPC, &conveyorv1.Hello{Queues: map[string]int32{"gone": 1}, Concurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	d := w.next(10 * time.Second).GetDispatch()
	expiry := res.Msg.GetTask().GetEnqueuedAt().AsTime().Add(time.Second)
	servertest.Eventually(t, 10*time.Second, "the task's expiry passed while it ran", func() bool { return time.Now().After(expiry) })
	w.send(&conveyorv1.WorkerMessage{Frame: &conveyorv1.WorkerMessage_Result{Result: &conveyorv1.Result{
		TaskId: d.GetTask().GetId(), AttemptId: d.GetAttemptId(), Outcome: conveyorv1.TaskOutcome_TASK_OUTCOME_RELEASED}}})
	servertest.Eventually(t, 10*time.Second, "the task archived for its expiry", func() bool {
		return value(scrape(t, s), "conveyor_queue_expired_total", "queue=gone") == 1
	})
	f := scrape(t, s)
	if got := value(f, "conveyor_tasks_archived_total", "queue=gone", "type=late"); got != -1 {
		t.Errorf("conveyor_tasks_archived_total = %v, want no series: no worker failed the task", got)
	}
	if got := value(f, "conveyor_tasks_released_total", "queue=gone", "type=late"); got != 1 {
		t.Errorf("conveyor_tasks_released_total = %v, want 1", got)
	}
}

// engineName is the engine name the test servers report.
func engineName() string {
	if servertest.Engine() == servertest.EnginePostgres {
		return "postgres"
	}
	return "bbolt"
}
