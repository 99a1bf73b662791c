package main

import (
	"cmp"
	"context"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/internal/testwait"
	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
)

// chaosKills is how many times the chaos test kills a node and restarts it.
const chaosKills = 50

// TestClusterChaos: three nodes under mixed load (a producer and a worker
// on each), one node at random killed with SIGKILL and restarted, fifty
// times. Then no acknowledged task is lost, every one completed, and no
// task ran while another attempt of it was current (see overlapAllowed).
func TestClusterChaos(t *testing.T) {
	c := newCluster(t, 3)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed))

	runs := &runLog{}
	for i := range c.nodes {
		c.worker(i, func(w *conveyor.Worker) {
			w.HandleFunc("chaos", func(ctx context.Context, d *conveyor.Delivery) error {
				r := taskRun{id: d.ID, attempt: d.AttemptID, node: i, start: time.Now()}
				defer func() { r.end = time.Now(); runs.add(r) }()
				select { // the task's work
				case <-time.After(time.Duration(rand.IntN(20)) * time.Millisecond):
					return nil
				case <-ctx.Done():
					return ctx.Err()
				}
			})
		}, conveyor.WithQueue("chaos", 1), conveyor.WithConcurrency(8))
	}
	load := startChaosLoad(c)

	for range chaosKills {
		i := rng.IntN(len(c.nodes))
		total, own := load.total.Load(), load.perNode[i].Load()
		c.kill(i)
		if rng.IntN(4) == 0 { // a quarter of the time, the others work on while it is down
			down := load.total.Load()
			testwait.Until(t, crashWait, "enqueues acknowledged with a node down", func() bool {
				return load.total.Load() >= down+20
			})
		}
		c.restart(i)
		// Paced by progress: the cluster took enqueues meanwhile, and the
		// restarted node takes them again.
		testwait.Until(t, crashWait, "enqueues acknowledged after a restart", func() bool {
			return load.total.Load() >= total+20 && load.perNode[i].Load() > own
		})
	}
	acked := load.stop()
	t.Logf("%d kills; %d enqueues acknowledged; %d handler runs", chaosKills, len(acked), runs.len())

	c.waitStates(0, "chaos", acked, conveyorv1.TaskState_TASK_STATE_COMPLETED, livenessWait()+crashWait)
	checkRuns(t, c, acked, runs.all())
}

// taskRun is one run of a handler: the task, its attempt, the node its
// worker was connected to, and when the handler started and returned.
type taskRun struct {
	id, attempt string
	node        int
	start, end  time.Time
}

// runLog collects the runs of every worker of the test.
type runLog struct {
	mu   sync.Mutex
	runs []taskRun
}

func (l *runLog) add(r taskRun) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.runs = append(l.runs, r)
}

func (l *runLog) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.runs)
}

func (l *runLog) all() []taskRun {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.runs)
}

// checkRuns checks that every acknowledged task ran, that no attempt ran
// twice, and that two runs of one task overlapped only where
// overlapAllowed says.
func checkRuns(t *testing.T, c *cluster, acked []string, runs []taskRun) {
	t.Helper()
	byTask := map[string][]taskRun{}
	for _, r := range runs {
		byTask[r.id] = append(byTask[r.id], r)
	}
	bad := 0
	report := func(format string, args ...any) {
		if bad++; bad <= 10 {
			t.Errorf(format, args...)
		}
	}
	for _, id := range acked {
		if len(byTask[id]) == 0 {
			report("task %s completed and no handler ran it", id)
		}
	}
	overlaps := 0
	for id, rs := range byTask {
		slices.SortFunc(rs, func(a, b taskRun) int { return a.start.Compare(b.start) })
		attempts := map[string]bool{}
		for j, later := range rs {
			if later.attempt != "" && attempts[later.attempt] {
				report("task %s: attempt %s ran twice", id, later.attempt)
			}
			attempts[later.attempt] = true
			for _, earlier := range rs[:j] {
				if !later.start.Before(earlier.end) {
					continue
				}
				overlaps++
				if !c.overlapAllowed(earlier, later) {
					report("task %s: attempt %s (node %d, %s to %s) ran while attempt %s (node %d, %s to %s) was current",
						id, later.attempt, later.node, clock(later.start), clock(later.end),
						earlier.attempt, earlier.node, clock(earlier.start), clock(earlier.end))
				}
			}
		}
	}
	if bad > 0 {
		t.Fatalf("%d violations in %d runs of %d tasks", bad, len(runs), len(byTask))
	}
	t.Logf("%d runs of %d tasks; %d overlapping runs, each after its earlier run's node was killed", len(runs), len(byTask), overlaps)
}

func clock(t time.Time) string { return t.Format("15:04:05.000") }

// overlapAllowed reports whether later may have started while earlier
// was still running. Only one attempt of a task is current at a time:
// the server leases the task to one session, and takes it back only when
// the lease is lost. A lease is lost with its node: a node killed with
// SIGKILL holds its tasks until its liveness lapses, then the leader puts
// them back to PENDING and they are dispatched again, while the worker
// that ran the earlier attempt may not have noticed yet (its handler runs
// until its context ends, which is at least once delivery, not two
// current attempts). So an overlap is allowed when the run of the node
// that earlier's worker was connected to, the run under which earlier
// started, was killed before later started. Nothing else in this test
// takes a lease back: the handlers are short and heartbeat, far inside
// the lease's TTL. (A node whose heartbeats could not reach the database
// for a whole liveness would lose its leases too, and show here as a
// violation: a machine far too loaded for the test's liveness.) (A dispatch the worker received just before its node
// was killed and started after the restart is counted against the new
// run, which makes the rule stricter, not looser; a dispatch by the new
// run started before the test read that the node serves is counted
// against the killed run, a window of milliseconds that makes it looser.)
func (c *cluster) overlapAllowed(earlier, later taskRun) bool {
	n := c.nodes[earlier.node]
	// starts[k] began run k; kills[k], if any, ended it.
	k := max(0, countAtOrBefore(n.starts, earlier.start)-1)
	return k < len(n.kills) && n.kills[k].Before(later.start)
}

// countAtOrBefore returns how many of times (in order) are at or before at.
func countAtOrBefore(times []time.Time, at time.Time) int {
	i, found := slices.BinarySearchFunc(times, at, func(e, at time.Time) int { return cmp.Compare(e.UnixNano(), at.UnixNano()) })
	if found {
		i++
	}
	return i
}

// chaosLoad is one producer per node, each enqueueing a task every few
// milliseconds through the Go SDK, and keeping the ids the server
// acknowledged. A failed enqueue (its node is down) is not retried: the
// next tick sends another.
type chaosLoad struct {
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	total   atomic.Int64
	perNode []atomic.Int64

	mu    sync.Mutex
	acked []string
}

// chaosPace is the time between one producer's enqueues: about 150
// tasks a second in all, so that the tasks of a few minutes stay few
// enough to list on a small machine.
const chaosPace = 20 * time.Millisecond

func startChaosLoad(c *cluster) *chaosLoad {
	ctx, cancel := context.WithCancel(context.Background())
	l := &chaosLoad{cancel: cancel, perNode: make([]atomic.Int64, len(c.nodes))}
	for i := range c.nodes {
		cl := c.client(i)
		l.wg.Go(func() { l.produce(ctx, cl, i) })
	}
	c.t.Cleanup(func() { l.stop() })
	return l
}

func (l *chaosLoad) produce(ctx context.Context, cl *conveyor.Client, node int) {
	pace := time.NewTicker(chaosPace)
	defer pace.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-pace.C:
		}
		call, cancel := context.WithTimeout(ctx, enqueueDeadline)
		info, err := cl.Enqueue(call, "chaos", nil, conveyor.Queue("chaos"))
		cancel()
		if err != nil {
			continue
		}
		l.mu.Lock()
		l.acked = append(l.acked, info.ID)
		l.mu.Unlock()
		l.total.Add(1)
		l.perNode[node].Add(1)
	}
}

// stop stops the producers and returns the acknowledged tasks' ids.
func (l *chaosLoad) stop() []string {
	l.cancel()
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.acked)
}
