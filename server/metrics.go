package server

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/conveyor-dev/conveyor/broker"
)

// MetricsPath is the HTTP path of the Prometheus exposition.
const MetricsPath = "/metrics"

// metrics is what the server exposes on /metrics. Events the server sees
// (enqueues, dispatches, worker results, lapses, commits, cron fires) are
// counted as they happen; queue depths and the persisted totals are read
// at scrape time from the engine's incremental counts (Broker.Queues),
// which costs one pass over the queues, never over the tasks. docs/
// operations.md lists every metric. Every queue, type and cron label is
// capped (metrics_labels.go), so that a scrape stays bounded.
type metrics struct {
	registry *prometheus.Registry

	enqueued, dispatched                   *prometheus.CounterVec
	completed, retried, archived, canceled *prometheus.CounterVec
	released, lapsed                       *prometheus.CounterVec
	wait                                   *prometheus.HistogramVec
	run                                    *prometheus.HistogramVec
	commitOps                              prometheus.Histogram
	commitSeconds                          prometheus.Histogram
	cronFires                              *prometheus.CounterVec
	rejected                               *prometheus.CounterVec
	pushRequests                           *prometheus.CounterVec
	startDecisions                         *prometheus.CounterVec
	pushSeconds                            *prometheus.HistogramVec

	// cronMu orders a fire's count against its entry's delete, and
	// cronExists says whether an entry is still stored (set by the
	// server). A fire applied just before a DeleteCron is counted after
	// it; without the check, the count would bring back the series the
	// delete dropped, for an entry that no longer exists.
	// crons, under cronMu, caps the cron label.
	cronMu     sync.Mutex
	cronExists func(id string) bool
	crons      *labelCap

	// typesMu guards queues, the queue label's cap; types, the (queue
	// label, type) pairs given a type label of their own; and series,
	// every per-type series resolved so far of a queue and a type with
	// labels of their own: a vec's WithLabelValues checks and hashes the
	// labels and takes the vec's lock, five times a task otherwise.
	typesMu sync.Mutex
	queues  *labelCap
	types   map[[2]string]struct{}
	series  map[seriesKey]prometheus.Metric
	waits   map[string]prometheus.Observer // the wait histogram's series, by queue
}

// seriesKey names one series of a per-type vec: the vec, the queue and
// the type (both with a label of their own: the labels are the names).
type seriesKey struct {
	vec        any
	queue, typ string
}

func newMetrics() *metrics {
	m := &metrics{registry: prometheus.NewRegistry(), crons: newLabelCap(maxCronLabels), queues: newLabelCap(maxQueueLabels),
		types: map[[2]string]struct{}{}, series: map[seriesKey]prometheus.Metric{}, waits: map[string]prometheus.Observer{}}
	perType := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: "conveyor_tasks_" + name + "_total", Help: help}, []string{"queue", "type"})
	}
	m.enqueued = perType("enqueued", "Tasks accepted by Enqueue, EnqueueBatch, EnqueueTx and cron fires.")
	m.dispatched = perType("dispatched", "Deliveries sent to workers (each member of a BatchDispatch counts).")
	m.completed = perType("completed", "Attempts a worker's Result completed.")
	m.retried = perType("retried", "Attempts a worker's Result failed that will be retried.")
	m.archived = perType("archived", "Attempts that failed for good: a worker's Result (retries exhausted, or SKIP_RETRY), or a lease lapse with no retries left.")
	m.canceled = perType("canceled", "Attempts that ended CANCELED by an operator's cancel (answered, or lapsed).")
	m.released = perType("released", "Attempts a worker handed back unrun (RELEASED, or left out of a BatchResult).")
	m.lapsed = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "conveyor_lease_expirations_total",
		Help: "Leases the reaper took back: missed heartbeats, or attempts past their timeout or deadline."}, []string{"queue", "type"})
	m.wait = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "conveyor_task_wait_seconds",
		Help:    "From when a task became due (enqueued, its scheduled time, or its retry time) to its dispatch.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 4, 12)}, []string{"queue"})
	m.run = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "conveyor_task_run_seconds",
		Help:    "From dispatch to the worker's Result, per attempt.",
		Buckets: prometheus.ExponentialBuckets(0.001, 4, 12)}, []string{"queue", "type"})
	m.commitOps = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "conveyor_commit_ops",
		Help: "Changes carried by one group commit.", Buckets: prometheus.ExponentialBuckets(1, 4, 9)})
	m.commitSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "conveyor_commit_seconds",
		Help: "Time to write and fsync one group commit.", Buckets: prometheus.ExponentialBuckets(0.0001, 2.5, 12)})
	m.cronFires = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "conveyor_cron_fires_total",
		Help: "Cron fires by entry and result: enqueued, refused (the task was refused, e.g. its unique key held) or skipped (missed while down)."},
		[]string{"cron", "result"})
	m.rejected = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "conveyor_enqueue_rejected_total",
		Help: "New tasks refused, by queue and reason: full (the queue was at its max_waiting when the producer's wait for room ended, or when a cron fire found it so)."},
		[]string{"queue", "reason"})
	m.pushRequests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "conveyor_push_requests_total",
		Help: "Invocations of push endpoints, by queue and the class of their answer: success, retry, skip_retry, released (a PushResponse's outcome); http_status, bad_response, timeout, connection, aborted (no proof: counted as a failed attempt)."},
		[]string{"queue", "class"})
	m.pushSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "conveyor_push_request_seconds",
		Help:    "From sending a push endpoint its request to its answer (or the request's end), per invocation.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 4, 12)}, []string{"queue"})
	m.startDecisions = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "conveyor_start_decisions_total",
		Help: "StartDecisions sent to workers for at-most-once tasks, by whether the start was authorized (true) or refused (false)."},
		[]string{"authorized"})
	m.registry.MustRegister(m.enqueued, m.dispatched, m.completed, m.retried, m.archived, m.canceled, m.released,
		m.lapsed, m.wait, m.run, m.commitOps, m.commitSeconds, m.cronFires, m.rejected, m.pushRequests, m.pushSeconds,
		m.startDecisions)
	// The Go runtime's and the process's own metrics, named conveyor_go_*
	// and conveyor_process_* so that everything here is conveyor_*.
	prefixed := prometheus.WrapRegistererWithPrefix("conveyor_", m.registry)
	prefixed.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// typeLabelLocked is the type label of typ in a queue labelled
// queueLabel: the type itself for the first maxTypeLabels pairs seen (of
// types of at most maxLabelBytes), otherLabel after.
func (m *metrics) typeLabelLocked(queueLabel, typ string) string {
	k := [2]string{queueLabel, typ}
	if _, ok := m.types[k]; ok {
		return typ
	}
	if len(typ) > maxLabelBytes || len(m.types) >= maxTypeLabels {
		return otherLabel
	}
	m.types[k] = struct{}{}
	return typ
}

// counter is c's series for (queue, typ), resolved once.
func (m *metrics) counter(c *prometheus.CounterVec, queue, typ string) prometheus.Counter {
	return resolve(m, c, queue, typ, func(q, t string) prometheus.Metric { return c.WithLabelValues(q, t) }).(prometheus.Counter)
}

// observer is h's series for (queue, typ), resolved once.
func (m *metrics) observer(h *prometheus.HistogramVec, queue, typ string) prometheus.Observer {
	return resolve(m, h, queue, typ, func(q, t string) prometheus.Metric {
		return h.WithLabelValues(q, t).(prometheus.Metric)
	}).(prometheus.Observer)
}

// resolve returns vec's series for (queue, typ) from the cache, making it
// with newSeries (given the queue and type labels) the first time.
func resolve(m *metrics, vec any, queue, typ string, newSeries func(queueLabel, typeLabel string) prometheus.Metric) prometheus.Metric {
	m.typesMu.Lock()
	defer m.typesMu.Unlock()
	k := seriesKey{vec: vec, queue: queue, typ: typ}
	if s, ok := m.series[k]; ok {
		return s
	}
	ql := m.queues.label(queue)
	tl := m.typeLabelLocked(ql, typ)
	s := newSeries(ql, tl)
	if ql == queue && tl == typ {
		m.series[k] = s // a name folded into otherLabel is not kept: there is no end to them
	}
	return s
}

func (m *metrics) count(c *prometheus.CounterVec, queue, typ string) { m.counter(c, queue, typ).Inc() }

// waitOf is the wait histogram's series for queue, resolved once.
func (m *metrics) waitOf(queue string) prometheus.Observer {
	m.typesMu.Lock()
	defer m.typesMu.Unlock()
	if o, ok := m.waits[queue]; ok {
		return o
	}
	label := m.queues.label(queue)
	o := m.wait.WithLabelValues(label)
	if label == queue {
		m.waits[queue] = o
	}
	return o
}

// enqueuedTask counts one accepted task.
func (m *metrics) enqueuedTask(t *broker.Task) { m.count(m.enqueued, t.Queue, t.Type) }

// dispatchedTask counts one delivery and how long the task waited for it.
func (m *metrics) dispatchedTask(t *broker.Task, now time.Time) {
	m.count(m.dispatched, t.Queue, t.Type)
	due := t.NextProcessAt
	if due.Before(t.EnqueuedAt) {
		due = t.EnqueuedAt
	}
	if !due.IsZero() && now.After(due) {
		m.waitOf(t.Queue).Observe(now.Sub(due).Seconds())
	}
}

// attemptEnded counts what a worker's Result led to, and the attempt's run
// time. The decision says what the worker meant; the state after it (to)
// says what the engine made of it, which differs for a RETRY due at once
// (PENDING, not RETRY) and for a task whose expiry passed while it ran
// (ARCHIVED, that expiry counted in conveyor_queue_expired_total).
func (m *metrics) attemptEnded(queue, typ string, kind broker.DecisionKind, to broker.State, ran time.Duration) {
	c := m.attemptCounter(kind, to)
	if c == nil {
		return
	}
	m.count(c, queue, typ)
	if kind != broker.DecideRelease {
		m.observer(m.run, queue, typ).Observe(ran.Seconds())
	}
}

// attemptCounter is the per-type counter of an attempt decided kind that
// left its task in state to (nil: none).
func (m *metrics) attemptCounter(kind broker.DecisionKind, to broker.State) *prometheus.CounterVec {
	switch {
	case to == broker.StateCompleted:
		return m.completed
	case to == broker.StateCanceled: // an operator's cancel overrides the decision
		return m.canceled
	case kind == broker.DecideRelease:
		return m.released
	case to == broker.StateArchived:
		return m.archived
	case kind == broker.DecideRetry:
		return m.retried
	}
	return nil
}

// leaseLapsed counts one lease the reaper took back and, when the lapse
// ended the task for good (its retries spent, or an operator's cancel
// while it ran), that end too: a task that crashes every worker it
// reaches never sends a Result, and must still show as failing for good.
// to is the state the lapse left the task in (0: not known).
func (m *metrics) leaseLapsed(queue, typ string, to broker.State) {
	m.count(m.lapsed, queue, typ)
	switch to {
	case broker.StateArchived:
		m.count(m.archived, queue, typ)
	case broker.StateCanceled:
		m.count(m.canceled, queue, typ)
	}
}

// sessionMetrics is what the worker sessions record (sessions.Metrics),
// in the server's metrics.
type sessionMetrics struct{ m *metrics }

func (s sessionMetrics) TaskDispatched(t *broker.Task, now time.Time) { s.m.dispatchedTask(t, now) }

func (s sessionMetrics) LeaseLapsed(queue, typ string, to broker.State) {
	s.m.leaseLapsed(queue, typ, to)
}

func (s sessionMetrics) AttemptEnded(queue, typ string, kind broker.DecisionKind, to broker.State, ran time.Duration) {
	s.m.attemptEnded(queue, typ, kind, to, ran)
}

func (s sessionMetrics) StartDecided(authorized bool) {
	s.m.startDecisions.WithLabelValues(strconv.FormatBool(authorized)).Inc()
}

// committed records one group commit.
func (m *metrics) committed(c broker.Commit) {
	m.commitOps.Observe(float64(c.Ops))
	m.commitSeconds.Observe(c.Took.Seconds())
}

// queueDeleted drops every series of a queue a DeleteQueue forgot, and
// its cached series, type labels (which count toward maxTypeLabels) and
// queue label (which counts toward maxQueueLabels), so that queues created
// and deleted over a server's life do not pile up series. A queue counted
// under otherLabel has no series of its own: its counts stay there. The
// cache and the vecs change under one lock, so no series is cached that
// its vec no longer holds (its counts would be lost for
// good). A task enqueued into the name again meanwhile loses the counts
// made before this drop: its series start again from zero, as a reset.
// (Depths and persisted totals are read from the engine at scrape time:
// a deleted queue is not listed any more.)
func (m *metrics) queueDeleted(queue string) {
	m.typesMu.Lock()
	defer m.typesMu.Unlock()
	if !m.queues.forget(queue) {
		return
	}
	for k := range m.series {
		if k.queue == queue {
			delete(m.series, k)
		}
	}
	for k := range m.types {
		if k[0] == queue {
			delete(m.types, k)
		}
	}
	delete(m.waits, queue)
	match := prometheus.Labels{"queue": queue}
	for _, v := range []*prometheus.CounterVec{m.enqueued, m.dispatched, m.completed, m.retried, m.archived,
		m.canceled, m.released, m.lapsed} {
		v.DeletePartialMatch(match)
	}
	m.wait.DeletePartialMatch(match)
	m.run.DeletePartialMatch(match)
	m.rejected.DeletePartialMatch(match)
	m.pushRequests.DeletePartialMatch(match)
	m.pushSeconds.DeletePartialMatch(match)
}

// pushAnswered counts one invocation of queue's push endpoint by the
// class of its answer (push.Class*), and how long it took.
func (m *metrics) pushAnswered(queue, class string, took time.Duration) {
	q := m.queueLabel(queue)
	m.pushRequests.WithLabelValues(q, class).Inc()
	m.pushSeconds.WithLabelValues(q).Observe(took.Seconds())
}

// cronDeleted forgets the fire counts of an entry a DeleteCron asked to
// remove, so that entries created and deleted over a server's life do not
// pile up series. It asks the engine rather than trusting the call's
// answer: a caller that gave up while the delete's commit was pending got
// an error, and the entry is gone all the same.
func (m *metrics) cronDeleted(id string) {
	m.cronMu.Lock()
	defer m.cronMu.Unlock()
	if (m.cronExists == nil || !m.cronExists(id)) && m.crons.forget(id) {
		m.cronFires.DeletePartialMatch(prometheus.Labels{"cron": id})
	}
}

// rejectedFull is the reason label of tasks refused by a full queue.
const rejectedFull = "full"

// enqueueRejected counts n new tasks of queue refused for reason, under
// the queue's label (its name, or otherLabel past the cap).
func (m *metrics) enqueueRejected(queue, reason string, n int) {
	m.rejected.WithLabelValues(m.queueLabel(queue), reason).Add(float64(n))
}

// cronFired counts one cron fire by its result, under the entry's cron
// label (its id, or otherLabel past maxCronLabels), and the task it
// enqueued (that one whatever became of the entry: the task exists) or
// the refusal of a full queue (err).
func (m *metrics) cronFired(id, result string, t *broker.Task, err error) {
	if q := fullQueue(err); q != "" {
		m.enqueueRejected(q, rejectedFull, 1)
	}
	m.cronMu.Lock()
	if m.cronExists == nil || m.cronExists(id) {
		m.cronFires.WithLabelValues(m.crons.label(id), result).Inc()
	}
	m.cronMu.Unlock()
	if t != nil {
		m.enqueuedTask(t)
	}
}

// stateCollector reads, at scrape time, what the engine and the hub keep
// incrementally: queue depths per state, the persisted per-queue totals,
// sessions and in-flight deliveries, and the store's size.
type stateCollector struct {
	server *Server

	queueTasks, queuePaused, queueEnqueued, queueProcessed, queueFailed *prometheus.Desc
	queueExpired, queueUnserved, releaseSessions                        *prometheus.Desc
	sessions, slots, inFlight, resultsDropped                           *prometheus.Desc
	fileBytes, freePages, dbBytes, deadTuples, storageOK, buildInfo     *prometheus.Desc
}

func newStateCollector(s *Server) *stateCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("conveyor_"+name, help, labels, nil)
	}
	return &stateCollector{
		server:         s,
		queueTasks:     d("queue_tasks", "Tasks in the queue, per state (terminal states until purged).", "queue", "state"),
		queuePaused:    d("queue_paused", "1 while the queue is paused (for queue _other: how many of its queues are).", "queue"),
		queueEnqueued:  d("queue_enqueued_total", "Tasks ever enqueued into the queue (persisted across restarts).", "queue"),
		queueProcessed: d("queue_processed_total", "Attempts that ended with a worker's verdict (persisted).", "queue"),
		queueFailed:    d("queue_failed_total", "Attempts that a worker failed: RETRY or SKIP_RETRY (persisted).", "queue"),
		queueExpired:   d("queue_expired_total", "Tasks archived unrun because their expiry or deadline passed while they waited (persisted).", "queue"),
		queueUnserved:  d("queue_unserved_types", "Types of the queue's waiting tasks that no live worker can take (they wait, PENDING).", "queue"),
		releaseSessions: d("release_sessions", "Live worker sessions of this node per release (\"\": unversioned), and whether it is drained.",
			"release", "draining"),
		sessions:       d("sessions", "Live worker sessions."),
		slots:          d("session_slots", "Slots of the live sessions, in all: each one's declared concurrency, capped at the server's per-session limit."),
		inFlight:       d("tasks_in_flight", "Deliveries holding a session slot."),
		resultsDropped: d("results_dropped_total", "Results dropped: late (their lease had lapsed or been reassigned) or unknown (a task the session does not hold: never held, or its Result already applied).", "reason"),
		fileBytes:      d("storage_file_bytes", "Size of the store's file."),
		freePages:      d("storage_free_pages", "Free pages in the store's file (reclaimed by conveyor compact)."),
		dbBytes:        d("storage_database_bytes", "What the engine's tables and indexes take in the database (PostgreSQL)."),
		deadTuples:     d("storage_dead_tuples", "Dead rows of the engine's tables not vacuumed yet, as the database estimates them (PostgreSQL)."),
		storageOK:      d("storage_healthy", "0 while the storage refuses writes (a full disk) or cannot be reached (a database down), else 1."),
		buildInfo:      d("build_info", "Always 1; the labels name the version and the engine.", "version", "engine"),
	}
}

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.queueTasks, c.queuePaused, c.queueEnqueued, c.queueProcessed, c.queueFailed, c.queueExpired,
		c.queueUnserved, c.releaseSessions,
		c.sessions, c.slots, c.inFlight, c.resultsDropped, c.fileBytes, c.freePages, c.dbBytes, c.deadTuples, c.storageOK, c.buildInfo} {
		ch <- d
	}
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.server
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	if qs, err := s.broker.Queues(ctx); err == nil {
		for _, q := range c.foldQueues(qs) {
			for st := broker.StateScheduled; st < broker.NumStates; st++ {
				gauge(c.queueTasks, float64(q.Counts[st]), q.Name, st.String())
			}
			gauge(c.queuePaused, float64(q.paused), q.Name)
			counter(c.queueEnqueued, float64(q.Enqueued), q.Name)
			counter(c.queueProcessed, float64(q.Processed), q.Name)
			counter(c.queueFailed, float64(q.Failed), q.Name)
			counter(c.queueExpired, float64(q.Expired), q.Name)
			if q.Name != otherLabel {
				gauge(c.queueUnserved, float64(len(s.unservedTypes(ctx, q.QueueInfo))), q.Name)
			}
		}
	}
	for _, r := range s.hub.ReleaseLoads() {
		gauge(c.releaseSessions, float64(r.Sessions), r.ID, strconv.FormatBool(r.Draining))
	}
	load := s.hub.Load()
	gauge(c.sessions, float64(load.Sessions))
	gauge(c.slots, float64(load.Slots))
	gauge(c.inFlight, float64(load.InFlight))
	counter(c.resultsDropped, float64(s.hub.LateResults()), "late")
	counter(c.resultsDropped, float64(s.hub.UnknownResults()), "unknown")
	info, _ := s.broker.Info(ctx)
	if fs, ok := s.broker.(broker.FileStater); ok {
		if st, err := fs.FileStats(); err == nil {
			gauge(c.fileBytes, float64(st.SizeBytes))
			gauge(c.freePages, float64(st.FreePages))
		}
	}
	if ds, ok := s.broker.(broker.DatabaseStater); ok {
		if st, err := ds.DatabaseStats(ctx); err == nil {
			gauge(c.dbBytes, float64(st.SizeBytes))
			gauge(c.deadTuples, float64(st.DeadTuples))
		}
	}
	healthy := true
	if h, ok := s.broker.(broker.StorageHealth); ok {
		healthy = h.StorageError() == nil
	}
	gauge(c.storageOK, boolFloat(healthy))
	gauge(c.buildInfo, 1, s.cfg.Version, info.Engine)
}

// queueSeries is what the queue metrics export for one queue label: one
// queue's figures, or the sums of the queues folded into otherLabel.
type queueSeries struct {
	broker.QueueInfo
	paused int // the paused queues among them
}

// foldQueues is qs by queue label (see metrics.queueLabel): the queues
// with a label of their own as they are, and the others summed into one
// otherLabel entry, last.
func (c *stateCollector) foldQueues(qs []broker.QueueInfo) []queueSeries {
	out := make([]queueSeries, 0, min(len(qs), maxQueueLabels+1))
	other := queueSeries{QueueInfo: broker.QueueInfo{Name: otherLabel}}
	folded := false
	for _, q := range qs {
		paused := 0
		if q.Paused {
			paused = 1
		}
		if c.server.metrics.queueLabel(q.Name) == q.Name {
			out = append(out, queueSeries{QueueInfo: q, paused: paused})
			continue
		}
		folded = true
		other.paused += paused
		other.Enqueued += q.Enqueued
		other.Processed += q.Processed
		other.Failed += q.Failed
		other.Expired += q.Expired
		for st := range other.Counts {
			other.Counts[st] += q.Counts[st]
		}
	}
	if folded {
		out = append(out, other)
	}
	return out
}

func boolFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// metricsHandler serves /metrics, with the bearer token when the server
// has one (CONTRACT.md), each series labelled with the node on an engine
// several nodes share (nodeGatherer).
func (s *Server) metricsHandler() http.Handler {
	g := nodeGatherer{Gatherer: s.metrics.registry, node: func() string { return nodeID(s.broker) }}
	h := promhttp.HandlerFor(g, promhttp.HandlerOpts{MaxRequestsInFlight: 4})
	return s.gate.plain(h)
}
