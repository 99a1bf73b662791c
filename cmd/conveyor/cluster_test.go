package main

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/conveyor-dev/conveyor/broker"
	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/internal/pgtest"
	"github.com/conveyor-dev/conveyor/internal/testwait"
	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

// TestClusterCrossNodeDelivery: a producer on node A, workers only on
// node B; every task completes, each handled within a generous bound of
// its enqueue. The latency from the enqueue's call to the handler is
// logged, not asserted.
func TestClusterCrossNodeDelivery(t *testing.T) {
	c := newCluster(t, 2)
	var mu sync.Mutex
	started := map[string]time.Time{}
	c.worker(1, func(w *conveyor.Worker) {
		w.HandleFunc("cross", func(_ context.Context, d *conveyor.Delivery) error {
			mu.Lock()
			defer mu.Unlock()
			if _, ok := started[d.ID]; !ok {
				started[d.ID] = time.Now()
			}
			return nil
		})
	}, conveyor.WithQueue("cross", 1), conveyor.WithConcurrency(8))

	// A paced stream, so that each task finds the worker idle and the
	// latency is the path between the nodes, not a queue's wait.
	producer := c.client(0)
	sent := map[string]time.Time{}
	var ids []string
	pace := time.NewTicker(10 * time.Millisecond)
	defer pace.Stop()
	for range 200 {
		<-pace.C
		at := time.Now()
		info, err := producer.Enqueue(context.Background(), "cross", nil, conveyor.Queue("cross"))
		if err != nil {
			t.Fatal(err)
		}
		sent[info.ID] = at
		ids = append(ids, info.ID)
	}
	c.waitStates(0, "cross", ids, conveyorv1.TaskState_TASK_STATE_COMPLETED, crashWait)

	mu.Lock()
	defer mu.Unlock()
	latencies := make([]time.Duration, 0, len(ids))
	for _, id := range ids {
		d := started[id].Sub(sent[id])
		if d > 10*time.Second {
			t.Errorf("task %s reached its handler on node B %s after its enqueue on node A", id, d)
		}
		latencies = append(latencies, d)
	}
	slices.Sort(latencies)
	t.Logf("enqueue on node A to handler on node B, %d tasks: p50 %s, p90 %s, max %s", len(latencies),
		latencies[len(latencies)/2], latencies[len(latencies)*9/10], latencies[len(latencies)-1])
}

// TestClusterUniqueKeyAcrossNodes: the same unique key enqueued on two
// nodes, one after the other and then by racing callers, makes one task;
// every other enqueue gets already_exists, as on one node.
func TestClusterUniqueKeyAcrossNodes(t *testing.T) {
	c := newCluster(t, 2)
	ctx := context.Background()
	a, b := c.client(0), c.client(1)
	first, err := a.Enqueue(ctx, "once", nil, conveyor.Queue("uq"), conveyor.Unique("key-1", 0))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Enqueue(ctx, "once", nil, conveyor.Queue("uq"), conveyor.Unique("key-1", 0)); !errors.Is(err, conveyor.ErrAlreadyExists) {
		t.Fatalf("the key node A holds, enqueued on node B: %v, want already_exists", err)
	}

	// Racing: 16 callers, half on each node, one key.
	var won atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for g := range 16 {
		cl := []*conveyor.Client{a, b}[g%2]
		wg.Go(func() {
			_, err := cl.Enqueue(ctx, "once", nil, conveyor.Queue("uq"), conveyor.Unique("key-2", 0))
			switch {
			case err == nil:
				won.Add(1)
			case !errors.Is(err, conveyor.ErrAlreadyExists):
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("a racing enqueue: %v, want success or already_exists", err)
	}
	if won.Load() != 1 {
		t.Errorf("%d racing enqueues of one key succeeded, want 1", won.Load())
	}
	for i := range c.nodes {
		if got := len(c.listTasks(i, "uq")); got != 2 {
			t.Errorf("node %d lists %d tasks in the queue, want 2 (one per key)", i, got)
		}
	}
	if got := c.task(1, first.ID); got.GetState() != conveyorv1.TaskState_TASK_STATE_PENDING {
		t.Errorf("the first task as node B sees it: %v, want PENDING", got.GetState())
	}
}

// TestClusterKilledNodeTasksComeBack: a worker on node B holds tasks
// ACTIVE (its handlers block) when B is killed with SIGKILL. Once B's
// liveness lapses the tasks are PENDING again with no retry counted, and a
// worker on node A completes every one of them.
func TestClusterKilledNodeTasksComeBack(t *testing.T) {
	c := newCluster(t, 2)
	const n = 4
	release := make(chan struct{})
	var holding atomic.Int64
	c.worker(1, func(w *conveyor.Worker) {
		w.HandleFunc("held", func(ctx context.Context, _ *conveyor.Delivery) error {
			holding.Add(1)
			select {
			case <-release:
			case <-ctx.Done():
			}
			return ctx.Err()
		})
	}, conveyor.WithQueue("held", 1), conveyor.WithConcurrency(n))
	var ids []string
	for range n {
		info, err := c.client(1).Enqueue(context.Background(), "held", nil, conveyor.Queue("held"))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, info.ID)
	}
	testwait.Until(t, crashWait, "node B's worker holds every task", func() bool { return holding.Load() == n })
	c.waitStates(0, "held", ids, conveyorv1.TaskState_TASK_STATE_ACTIVE, crashWait)

	c.kill(1)
	killed := time.Now()
	defer close(release)
	listing := c.waitStates(0, "held", ids, conveyorv1.TaskState_TASK_STATE_PENDING, livenessWait())
	t.Logf("the killed node's tasks were PENDING again %s after the kill (liveness %s)", time.Since(killed), clusterLiveness)
	for _, id := range ids {
		if r := listing[id].GetRetried(); r != 0 {
			t.Errorf("task %s came back with retried %d, want 0: a node's death is not the task's failure", id, r)
		}
	}

	var handled sync.Map
	c.worker(0, func(w *conveyor.Worker) {
		w.HandleFunc("held", func(_ context.Context, d *conveyor.Delivery) error {
			handled.Store(d.ID, true)
			return nil
		})
	}, conveyor.WithQueue("held", 1))
	c.waitStates(0, "held", ids, conveyorv1.TaskState_TASK_STATE_COMPLETED, crashWait)
	for _, id := range ids {
		if _, ok := handled.Load(id); !ok {
			t.Errorf("task %s completed without node A's worker running it", id)
		}
		if r := c.task(0, id).GetRetried(); r != 0 {
			t.Errorf("task %s completed with retried %d, want 0", id, r)
		}
	}
}

// TestClusterCronFiresOnce: one cron entry firing every second, three
// nodes up for about five fires: the entry made one task per fire time,
// none twice. The entry is created before the second and third nodes
// start, so that each of them knows it from its start, whatever reaches
// the nodes later.
func TestClusterCronFiresOnce(t *testing.T) {
	c := newCluster(t, 1)
	if _, err := c.admin(0).CreateCron(context.Background(), connect.NewRequest(&conveyorv1.CreateCronRequest{Entry: &conveyorv1.CronEntry{
		Id: "tick", Spec: "@every 1s", Queue: "ticks", Type: "tick"}})); err != nil {
		t.Fatal(err)
	}
	c.add()
	c.add()
	third := clients{tasks: c.tasks(2), admin: c.admin(2)}
	fires := func() []time.Time { return third.fireTimes(t, "ticks") }
	// Five fires with the three nodes up.
	base := len(fires())
	testwait.Until(t, crashWait, "five cron fires with three nodes up", throttled(100*time.Millisecond, func() bool {
		return len(fires()) >= base+5
	}))
	times := fires()
	seen := map[time.Time]int{}
	for _, at := range times {
		seen[at]++
	}
	for at, n := range seen {
		if n > 1 {
			t.Errorf("fire time %s made %d tasks, want 1", at.Format(time.RFC3339), n)
		}
	}
	t.Logf("%d tasks for %d distinct fire times", len(times), len(seen))
}

// TestClusterAcknowledgedEnqueuesSurviveNodeKill: producers on three
// nodes, workers on each; one node is killed with SIGKILL mid-load and
// restarted. Every acknowledged enqueue is there and completes.
func TestClusterAcknowledgedEnqueuesSurviveNodeKill(t *testing.T) {
	c := newCluster(t, 3)
	var loads []*enqueueLoad
	var workers []*crashWorker
	for i := range c.nodes {
		loads = append(loads, startLoad(t, c.nodes[i].url, 3))
		workers = append(workers, startCrashWorker(t, c.nodes[i].url))
	}
	acks := func() (n int64) {
		for _, l := range loads {
			n += l.acks.Load()
		}
		return n
	}
	testwait.Until(t, crashWait, "600 acknowledged enqueues", func() bool { return acks() >= 600 })
	c.kill(1)
	atKill := acks()
	testwait.Until(t, crashWait, "300 more acknowledged enqueues with node 1 down", func() bool { return acks() >= atKill+300 })
	c.restart(1)
	atRestart, restartedAtRestart := acks(), loads[1].acks.Load()
	testwait.Until(t, crashWait, "300 more acknowledged enqueues, some by the restarted node", func() bool {
		return acks() >= atRestart+300 && loads[1].acks.Load() > restartedAtRestart
	})
	var acked []string
	for i, l := range loads {
		ids := l.stop()
		t.Logf("node %d: %d enqueues acknowledged; failed by code: %v", i, len(ids), l.failedCodes())
		acked = append(acked, ids...)
	}
	c.waitStates(0, "default", acked, conveyorv1.TaskState_TASK_STATE_COMPLETED, livenessWait()+crashWait)
	for _, w := range workers {
		w.checkRunning(t)
	}
}

// TestClusterMaxActiveAcrossNodes: a queue with max_active 2 and workers
// on two nodes, each able to run more: the handlers, counting in this
// process, never see more than two running at once.
func TestClusterMaxActiveAcrossNodes(t *testing.T) {
	c := newCluster(t, 1)
	if _, err := c.admin(0).UpdateQueueConfig(context.Background(), connect.NewRequest(&conveyorv1.UpdateQueueConfigRequest{
		Config: &conveyorv1.QueueConfig{Queue: "capped", MaxActive: 2}})); err != nil {
		t.Fatal(err)
	}
	c.add() // after the cap is set: it knows the cap from its start
	var running, most atomic.Int64
	handle := func(w *conveyor.Worker) {
		w.HandleFunc("capped", func(ctx context.Context, _ *conveyor.Delivery) error {
			raise(&most, running.Add(1))
			defer running.Add(-1)
			select { // the task's work: long enough for runs to overlap
			case <-time.After(20 * time.Millisecond):
			case <-ctx.Done():
			}
			return nil
		})
	}
	for i := range c.nodes {
		c.worker(i, handle, conveyor.WithQueue("capped", 1), conveyor.WithConcurrency(4))
	}
	var ids []string
	for g := range 60 {
		info, err := c.client(g%2).Enqueue(context.Background(), "capped", nil, conveyor.Queue("capped"))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, info.ID)
	}
	c.waitStates(0, "capped", ids, conveyorv1.TaskState_TASK_STATE_COMPLETED, crashWait)
	if m := most.Load(); m > 2 {
		t.Errorf("%d tasks of the queue ran at once across the nodes, want at most its max_active 2", m)
	}
	t.Logf("at most %d tasks ran at once", most.Load())
}

// TestClusterRateLimitAcrossNodes: a queue limited to 10 tasks a second
// (burst 2), workers on two nodes and producers on both: the starts the
// handlers see, across both nodes, keep to the one rate. Each node
// enforcing it alone would start them twice as fast. The bounds are the
// limit's own with a margin for the delivery's jitter.
func TestClusterRateLimitAcrossNodes(t *testing.T) {
	const rate, burst, n = 10, 2, 32
	c := newCluster(t, 1)
	if _, err := c.admin(0).UpdateQueueConfig(context.Background(), connect.NewRequest(&conveyorv1.UpdateQueueConfigRequest{
		Config: &conveyorv1.QueueConfig{Queue: "paced", RateLimit: &conveyorv1.RateLimit{PerSecond: rate, Burst: burst}}})); err != nil {
		t.Fatal(err)
	}
	c.add()
	var mu sync.Mutex
	var starts []time.Time
	handle := func(w *conveyor.Worker) {
		w.HandleFunc("paced", func(context.Context, *conveyor.Delivery) error {
			mu.Lock()
			starts = append(starts, time.Now())
			mu.Unlock()
			return nil
		})
	}
	for i := range c.nodes {
		c.worker(i, handle, conveyor.WithQueue("paced", 1), conveyor.WithConcurrency(8))
	}
	var ids []string
	for g := range n {
		info, err := c.client(g%2).Enqueue(context.Background(), "paced", nil, conveyor.Queue("paced"))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, info.ID)
	}
	c.waitStates(0, "paced", ids, conveyorv1.TaskState_TASK_STATE_COMPLETED, crashWait)
	mu.Lock()
	defer mu.Unlock()
	slices.SortFunc(starts, func(a, b time.Time) int { return a.Compare(b) })
	// At most burst + rate×d in any window of d = 1 s, with 3 of margin.
	most := 0
	for i := range starts {
		j := i
		for j < len(starts) && starts[j].Sub(starts[i]) < time.Second {
			j++
		}
		most = max(most, j-i)
	}
	if most > burst+rate+3 {
		t.Errorf("%d tasks started within one second across the nodes, want at most %d (burst %d + %d/s)", most, burst+rate, burst, rate)
	}
	// n tasks at the rate take (n - burst)/rate; at twice the rate, half.
	took := starts[len(starts)-1].Sub(starts[0])
	if least := time.Duration(float64(n-burst) / rate * 0.75 * float64(time.Second)); took < least {
		t.Errorf("%d tasks started over %s, want at least %s at %d/s", n, took, least, rate)
	}
	t.Logf("%d tasks started over %s; at most %d within a second", n, took, most)
}

// TestClusterRateLimitWakesFollowers: a rate-limited queue worked only
// by a worker on a node that does not lead: its session, idle while the
// bucket refills, is woken by its own node at the refill (not by the
// leader's promotions, which run elsewhere), and every task completes.
func TestClusterRateLimitWakesFollowers(t *testing.T) {
	c := newCluster(t, 2)
	if got := c.leader(); got != 0 {
		t.Fatalf("node %d leads, want the first node started", got)
	}
	if _, err := c.admin(0).UpdateQueueConfig(context.Background(), connect.NewRequest(&conveyorv1.UpdateQueueConfigRequest{
		Config: &conveyorv1.QueueConfig{Queue: "paced", RateLimit: &conveyorv1.RateLimit{PerSecond: 20, Burst: 1}}})); err != nil {
		t.Fatal(err)
	}
	c.worker(1, func(w *conveyor.Worker) {
		w.HandleFunc("paced", func(context.Context, *conveyor.Delivery) error { return nil })
	}, conveyor.WithQueue("paced", 1))
	var ids []string
	for range 20 {
		info, err := c.client(0).Enqueue(context.Background(), "paced", nil, conveyor.Queue("paced"))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, info.ID)
	}
	c.waitStates(0, "paced", ids, conveyorv1.TaskState_TASK_STATE_COMPLETED, crashWait)
}

// raise sets a to v if v is larger.
func raise(a *atomic.Int64, v int64) {
	for m := a.Load(); v > m; m = a.Load() {
		if a.CompareAndSwap(m, v) {
			return
		}
	}
}

// TestClusterCancelAcrossNodes: a task running on a worker of node B,
// canceled through AdminService on node A: the handler's context is
// canceled, and the failure it returns archives the task with the
// operator's cancel named (broker.Decision.Canceled, as on one node).
func TestClusterCancelAcrossNodes(t *testing.T) {
	c := newCluster(t, 2)
	running := make(chan string, 1)
	canceled := make(chan error, 1)
	c.worker(1, func(w *conveyor.Worker) {
		w.HandleFunc("long", func(ctx context.Context, d *conveyor.Delivery) error {
			running <- d.ID
			<-ctx.Done()
			canceled <- context.Cause(ctx)
			return ctx.Err()
		})
	}, conveyor.WithQueue("long", 1))
	info, err := c.client(1).Enqueue(context.Background(), "long", nil, conveyor.Queue("long"))
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-running:
	case <-time.After(crashWait):
		t.Fatal("the task never reached node B's worker")
	}
	c.waitStates(0, "long", []string{info.ID}, conveyorv1.TaskState_TASK_STATE_ACTIVE, crashWait)
	if _, err := c.admin(0).CancelTask(context.Background(), connect.NewRequest(&conveyorv1.CancelTaskRequest{Id: info.ID})); err != nil {
		t.Fatalf("cancel on node A: %v", err)
	}
	select {
	case cause := <-canceled:
		t.Logf("the handler's context ended: %v", cause)
	case <-time.After(30 * time.Second):
		t.Fatal("the handler on node B was not canceled 30s after the cancel on node A")
	}
	c.waitStates(0, "long", []string{info.ID}, conveyorv1.TaskState_TASK_STATE_ARCHIVED, crashWait)
	if got := c.task(0, info.ID); !strings.HasPrefix(got.GetLastError(), broker.CanceledMessage) {
		t.Fatalf("the canceled task: %v; want its last error to start with %q", got, broker.CanceledMessage)
	}
}

// TestClusterLeaderFailover: three nodes agree on the nodes and on one
// leader; the leader is killed with SIGKILL, and a task scheduled a second
// ahead is still promoted, within the liveness and a margin, by one of the
// others, which lead from then on.
func TestClusterLeaderFailover(t *testing.T) {
	c := newCluster(t, 3)
	testwait.Until(t, crashWait, "every node lists the three nodes", throttled(100*time.Millisecond, func() bool {
		for i := range c.nodes {
			if len(c.clusterNodes(i)) != 3 {
				return false
			}
		}
		return true
	}))
	leader := -1
	testwait.Until(t, crashWait, "one leader", throttled(100*time.Millisecond, func() bool {
		leader = c.leader()
		return leader >= 0
	}))
	t.Logf("node %d leads", leader)

	c.kill(leader)
	killed := time.Now()
	other := c.up()[0]
	info, err := c.client(other).Enqueue(context.Background(), "later", nil, conveyor.Queue("later"), conveyor.ProcessIn(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	c.waitStates(other, "later", []string{info.ID}, conveyorv1.TaskState_TASK_STATE_PENDING, clusterLiveness+10*time.Second)
	t.Logf("the task due 1s after the leader's kill was promoted %s after it", time.Since(killed))
	testwait.Until(t, crashWait, "a surviving node leads", throttled(100*time.Millisecond, func() bool {
		l := c.leader()
		return l >= 0 && l != leader
	}))
	testwait.Until(t, livenessWait(), "the survivors list two nodes", throttled(100*time.Millisecond, func() bool {
		for _, i := range c.up() {
			if len(c.clusterNodes(i)) != 2 {
				return false
			}
		}
		return true
	}))
}

// TestClusterPostgresRestartUnderLoad: two nodes on a PostgreSQL that is
// stopped in its immediate mode and started again under load, producers
// on node A only and the worker on node B only: once the database is
// back, tasks enqueued on A reach B again (each node's listener
// reconnected and read its counts again), and every acknowledged enqueue
// is drained to COMPLETED.
func TestClusterPostgresRestartUnderLoad(t *testing.T) {
	conveyorBinary(t) // skipped under -short, before the cluster is made
	db := pgtest.NewCluster(t)
	a := startPostgresChild(t, db.URL, "127.0.0.1:0", "--lease-ttl", "5s")
	b := startPostgresChild(t, db.URL, "127.0.0.1:0", "--lease-ttl", "5s")
	load := startLoad(t, a.url, 4)
	worker := startCrashWorker(t, b.url)
	servertest.Eventually(t, crashWait, "200 acknowledged enqueues on A and 100 tasks handled on B", func() bool {
		return load.acks.Load() >= 200 && worker.handled.Load() >= 100
	})

	db.Stop("immediate")
	unavailable := load.unavailable.Load()
	servertest.Eventually(t, crashWait, "an enqueue failed with unavailable during the outage", func() bool {
		return load.unavailable.Load() > unavailable
	})

	db.Start()
	ackedAtStart, handledAtStart := load.acks.Load(), worker.handled.Load()
	servertest.Eventually(t, crashWait, "enqueues on A acknowledged and handled on B once the database is back", func() bool {
		return load.acks.Load() >= ackedAtStart+200 && worker.handled.Load() >= handledAtStart+100
	})
	acked := load.stop()
	for code, n := range load.failedCodes() {
		if code != connect.CodeUnavailable {
			t.Errorf("%d enqueues failed with %v, want only unavailable: %s", n, code, load.firstFailure(code))
		}
	}
	checkAllCompleted(t, b.url, acked)
	worker.checkRunning(t)
}
