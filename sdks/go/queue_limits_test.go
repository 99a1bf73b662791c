package conveyor_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
	"github.com/conveyor-dev/conveyor/server"
)

// gauge counts handlers running at once and keeps the most it saw.
type gauge struct{ cur, max atomic.Int64 }

// enter counts one more running and returns how many run now.
func (g *gauge) enter() int64 {
	n := g.cur.Add(1)
	for m := g.max.Load(); n > m && !g.max.CompareAndSwap(m, n); m = g.max.Load() {
	}
	return n
}

func (g *gauge) exit() { g.cur.Add(-1) }

// configureQueue stores c as its queue's configuration.
func (e *wtEnv) configureQueue(c *conveyorv1.QueueConfig) {
	e.t.Helper()
	if _, err := e.admin.UpdateQueueConfig(context.Background(), connect.NewRequest(&conveyorv1.UpdateQueueConfigRequest{Config: c})); err != nil {
		e.t.Fatalf("UpdateQueueConfig(%v): %v", c, err)
	}
}

// enqueueTasks enqueues tasks with one EnqueueBatch per 1,000 and returns
// their ids in order.
func enqueueTasks(t *testing.T, c *conveyor.Client, tasks []*conveyor.Task) []string {
	t.Helper()
	var ids []string
	for lo := 0; lo < len(tasks); lo += server.MaxBatchItems {
		res, err := c.EnqueueBatch(context.Background(), tasks[lo:min(lo+server.MaxBatchItems, len(tasks))])
		if err != nil {
			t.Fatalf("EnqueueBatch: %v", err)
		}
		for i, r := range res {
			if r.Err != nil {
				t.Fatalf("enqueue task %d: %v", lo+i, r.Err)
			}
			ids = append(ids, r.Task.ID)
		}
	}
	return ids
}

// waitCompleted waits until queue has n COMPLETED tasks and nothing else
// left to run.
func (e *wtEnv) waitCompleted(queue string, n int64, timeout time.Duration) {
	e.t.Helper()
	e.waitQueue(queue, timeout, fmt.Sprintf("%d completed and nothing left", n), func(q *conveyorv1.QueueInfo) bool {
		return q.GetCompleted() == n && q.GetPending()+q.GetActive()+q.GetRetry() == 0
	})
}

// waitQueue polls queue's counts until cond holds; a timeout reports the
// counts last seen.
func (e *wtEnv) waitQueue(queue string, timeout time.Duration, what string, cond func(*conveyorv1.QueueInfo) bool) {
	e.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		q := e.queue(queue)
		if cond(q) {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("queue %s, waiting for %s for %s: pending %d, active %d, retry %d, completed %d, archived %d",
				queue, what, timeout, q.GetPending(), q.GetActive(), q.GetRetry(), q.GetCompleted(), q.GetArchived())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestQueueLimitsUnderManyWorkers runs three limited queues at once on
// six Workers of eight slots each, and checks from the handlers' side
// that no limit is ever exceeded and that each is reached (so a limit
// applied too strictly fails too):
//   - concurrency_limit 2: 400 tasks over 10 concurrency keys, at most 2
//     of a key running at once, and 2 for some key;
//   - max_active 5: at most 5 of the queue's tasks running, and 5 at
//     some point;
//   - a rate limit of 50/s with a burst of 5: the dispatch times the
//     server stamped (started_at) obey the token bucket.
//
// A handler runs while its task is ACTIVE on the server (leased before,
// answered after), so what the handlers see running at once is never more
// than the server let be ACTIVE.
func TestQueueLimitsUnderManyWorkers(t *testing.T) {
	t.Parallel()
	const (
		keyedN, keys, keyLimit = 400, 10, 2
		cappedN, maxActive     = 200, 5
		ratedN, rate, burst    = 150, 50, 5
	)
	e := wtSetup(t, server.Config{})
	e.configureQueue(&conveyorv1.QueueConfig{Queue: "keyed", ConcurrencyLimit: keyLimit})
	e.configureQueue(&conveyorv1.QueueConfig{Queue: "capped", MaxActive: maxActive})
	e.configureQueue(&conveyorv1.QueueConfig{Queue: "rated", RateLimit: &conveyorv1.RateLimit{PerSecond: rate, Burst: burst}})

	var (
		perKey     sync.Map // concurrency key → *gauge
		capped     gauge
		rated      atomic.Int64
		capOnce    sync.Once
		capReached = make(chan struct{}) // closed once maxActive capped tasks run at once
	)
	// The work outlasts a lease's round trip to the store (a
	// PostgreSQL commit is a millisecond or more), so that the capped
	// queue's slots are all taken at some point: shorter, and a slot freed
	// would not be taken again before the others ended.
	work := func(ctx context.Context) error {
		select {
		case <-time.After(20 * time.Millisecond):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	for range 6 {
		w := e.newWorker(conveyor.WithQueue("keyed", 1), conveyor.WithQueue("capped", 1), conveyor.WithQueue("rated", 1),
			conveyor.WithConcurrency(8))
		w.HandleFunc("keyed", func(ctx context.Context, d *conveyor.Delivery) error {
			g, _ := perKey.LoadOrStore(d.Options.ConcurrencyKey, new(gauge))
			g.(*gauge).enter()
			defer g.(*gauge).exit()
			return work(ctx)
		})
		w.HandleFunc("capped", func(ctx context.Context, _ *conveyor.Delivery) error {
			if capped.enter() >= maxActive {
				capOnce.Do(func() { close(capReached) })
			}
			defer capped.exit()
			// The first tasks wait for each other until max_active of
			// them run at once, so that reaching the limit does not hang
			// on how fast a loaded machine leases: a limit applied too
			// strictly never gets there, and the bound ends the wait.
			select {
			case <-capReached:
			case <-ctx.Done():
			case <-time.After(10 * time.Second):
			}
			return work(ctx)
		})
		w.HandleFunc("rated", func(context.Context, *conveyor.Delivery) error {
			rated.Add(1)
			return nil
		})
		wtRun(t, w)
	}

	client := newClient(t, e.srv.URL())
	var tasks []*conveyor.Task
	for i := range keyedN {
		tasks = append(tasks, conveyor.NewTask("keyed", nil, conveyor.Queue("keyed"), conveyor.ConcurrencyKey(fmt.Sprintf("key-%d", i%keys))))
	}
	for range cappedN {
		tasks = append(tasks, conveyor.NewTask("capped", nil, conveyor.Queue("capped")))
	}
	for range ratedN {
		tasks = append(tasks, conveyor.NewTask("rated", nil, conveyor.Queue("rated")))
	}
	ids := enqueueTasks(t, client, tasks)
	ratedIDs := ids[keyedN+cappedN:]
	e.waitCompleted("keyed", keyedN, 60*time.Second)
	e.waitCompleted("capped", cappedN, 60*time.Second)
	e.waitCompleted("rated", ratedN, 60*time.Second)

	var reached bool
	for k := range keys {
		v, ok := perKey.Load(fmt.Sprintf("key-%d", k))
		if !ok {
			t.Errorf("no task of key-%d ran", k)
			continue
		}
		m := v.(*gauge).max.Load()
		if m > keyLimit {
			t.Errorf("key-%d: %d tasks ran at once; the concurrency limit is %d", k, m, keyLimit)
		}
		reached = reached || m == keyLimit
	}
	if !reached {
		t.Errorf("no concurrency key ever had %d tasks running at once: the limit of %d was not used", keyLimit, keyLimit)
	}
	if m := capped.max.Load(); m != maxActive {
		t.Errorf("the capped queue had at most %d tasks running at once, want exactly max_active %d", m, maxActive)
	}
	if n := rated.Load(); n != ratedN {
		t.Errorf("the rated handler ran %d times, want %d", n, ratedN)
	}
	checkTokenBucket(t, client, ratedIDs, rate, burst)
}

// checkTokenBucket checks the dispatch times of tasks (their started_at,
// which the server stamps when it leases them, with the clock its token
// bucket reads) against a token bucket of rate per second holding at most
// burst tokens: a bucket that starts full lets at most burst + rate*(b-a)
// dispatches happen within any window [a, b]. The bound checked is one
// more than that, for two effects of a microsecond or so, each worth much
// less than a token at this rate: the bucket counts in float64 tokens
// from nanosecond deltas, and a dispatch is stamped with the time its
// lease call read the clock (or the time its task became pending, if
// later), which may differ slightly from the time the bucket reckoned
// with for it. Any real excess, a second burst or a refill too fast, is
// more than one.
func checkTokenBucket(t *testing.T, c *conveyor.Client, ids []string, rate, burst int) {
	t.Helper()
	starts := make([]time.Time, len(ids))
	for i, id := range ids {
		info, err := c.GetTask(context.Background(), id)
		if err != nil {
			t.Fatalf("GetTask(%s): %v", id, err)
		}
		if info.State != conveyor.TaskStateCompleted || info.StartedAt.IsZero() {
			t.Fatalf("rated task %s is %s with started_at %v, want completed with a start", id, info.State, info.StartedAt)
		}
		starts[i] = info.StartedAt
	}
	slices.SortFunc(starts, time.Time.Compare)
	t.Logf("%d rated dispatches over %s", len(starts), starts[len(starts)-1].Sub(starts[0]))
	var worst float64
	for i := range starts {
		for j := i + 1; j < len(starts); j++ {
			// starts[i..j] all lie within [starts[i], starts[j]].
			count := float64(j - i + 1)
			bound := float64(burst) + float64(rate)*starts[j].Sub(starts[i]).Seconds() + 1
			if count > bound {
				t.Fatalf("%d dispatches within %s (from %s): the token bucket (%d/s, burst %d) allows at most %.2f",
					j-i+1, starts[j].Sub(starts[i]), starts[i].Format(time.RFC3339Nano), rate, burst, bound-1)
			}
			worst = max(worst, count-bound+1)
		}
	}
	t.Logf("closest approach to the token bucket's bound: %.3f dispatches over it (at most 1 allowed)", worst)
}

// TestKeyedTaskHeldDoesNotBlockOthers: with the default concurrency
// limit of 1, fifty tasks on one key run one at a time, and while the
// first of them is held running, the fifty unkeyed tasks enqueued after
// them all complete: the key's waiting tasks do not block the queue.
func TestKeyedTaskHeldDoesNotBlockOthers(t *testing.T) {
	t.Parallel()
	const n, queue = 50, "held"
	e := wtSetup(t, server.Config{})
	cfg, err := e.admin.GetQueueConfig(context.Background(), connect.NewRequest(&conveyorv1.GetQueueConfigRequest{Queue: queue}))
	if err != nil || cfg.Msg.GetConcurrencyLimit() != 1 {
		t.Fatalf("GetQueueConfig(%s) = %v, %v; want the default concurrency limit, 1", queue, cfg, err)
	}

	release := make(chan struct{})
	var releaseOnce sync.Once
	releaseAll := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(releaseAll)
	entered := make(chan string, n)
	var keyed gauge
	for range 3 {
		w := e.newWorker(conveyor.WithQueue(queue, 1), conveyor.WithConcurrency(4))
		w.HandleFunc("t", func(ctx context.Context, d *conveyor.Delivery) error {
			if d.Options.ConcurrencyKey == "" {
				return nil
			}
			keyed.enter()
			defer keyed.exit()
			entered <- d.ID
			select {
			case <-release:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
		wtRun(t, w)
	}

	client := newClient(t, e.srv.URL())
	var tasks []*conveyor.Task
	for range n {
		tasks = append(tasks, conveyor.NewTask("t", nil, conveyor.Queue(queue), conveyor.ConcurrencyKey("one")))
	}
	for range n {
		tasks = append(tasks, conveyor.NewTask("t", nil, conveyor.Queue(queue)))
	}
	ids := enqueueTasks(t, client, tasks)
	held := wtRecv(t, entered, 20*time.Second, "the first keyed task to start")
	// Every unkeyed task completes; the keyed ones are the held one,
	// ACTIVE, and the other 49, PENDING behind it on their key.
	e.waitQueue(queue, 20*time.Second, "the unkeyed tasks to complete", func(q *conveyorv1.QueueInfo) bool {
		return q.GetCompleted() == n && q.GetActive() == 1 && q.GetPending() == n-1
	})
	for _, id := range ids[n:] {
		if info, err := client.GetTask(context.Background(), id); err != nil || info.State != conveyor.TaskStateCompleted {
			t.Fatalf("unkeyed task %s: %v, %v; want completed while the keyed task is held", id, info, err)
		}
	}
	if info, err := client.GetTask(context.Background(), held); err != nil || info.State != conveyor.TaskStateActive {
		t.Fatalf("the held keyed task %s: %v, %v; want it still active", held, info, err)
	}
	select {
	case id := <-entered:
		t.Fatalf("keyed task %s started while %s of the same key ran; the limit is 1", id, held)
	default:
	}

	releaseAll()
	e.waitCompleted(queue, 2*n, 20*time.Second)
	if m := keyed.max.Load(); m != 1 {
		t.Errorf("%d tasks of one key ran at once, want 1", m)
	}
	if got := len(entered) + 1; got != n {
		t.Errorf("%d keyed tasks ran, want %d", got, n)
	}
}
