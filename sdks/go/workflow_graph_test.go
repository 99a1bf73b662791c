package conveyor_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

// graphSeed picks the random dependency graph of TestDependencyGraphSettles;
// a failure names the seed it ran with, so it can be run again.
var graphSeed = flag.Uint64("graph-seed", 20261201, "seed of the random dependency graph in TestDependencyGraphSettles")

// graphNode is one task of a generated dependency graph.
type graphNode struct {
	id    string
	fails bool // its handler fails for good (SKIP_RETRY): ARCHIVED if it runs
	deps  []graphDep
}

// graphDep is a dependency on an earlier node of the graph.
type graphDep struct {
	on     int // the index of the node depended on
	policy conveyor.OnFailure
}

// newGraph generates n nodes as workflows of 25 tasks: each workflow's
// first task is a root, and each later task is a root too (one in five)
// or depends on one to three distinct earlier tasks of its workflow, and
// now and then on a task of an earlier workflow, under every policy
// (unspecified, which means BLOCK, included). One task in 20 is designed
// to fail. Workflows keep a failure's reach to a few dozen tasks, so that
// every outcome is common; the EnqueueTx calls of 240 tasks cut through
// workflows, so dependencies reach both into the same call and into
// earlier ones.
func newGraph(r *rand.Rand, n int) []graphNode {
	const workflow = 25
	policies := []conveyor.OnFailure{conveyor.OnFailureUnspecified, conveyor.OnFailureBlock,
		conveyor.OnFailureCascadeCancel, conveyor.OnFailureCascadeCancel, conveyor.OnFailureContinue, conveyor.OnFailureContinue}
	g := make([]graphNode, n)
	for i := range g {
		g[i] = graphNode{id: ulid.Make().String(), fails: r.IntN(20) == 0}
		first := i - i%workflow
		if i == first || r.IntN(5) == 0 {
			continue // a root
		}
		seen := map[int]bool{}
		for range 1 + r.IntN(3) {
			on := first + r.IntN(i-first)
			if first > 0 && r.IntN(50) == 0 {
				on = r.IntN(first)
			}
			if seen[on] {
				continue
			}
			seen[on] = true
			g[i].deps = append(g[i].deps, graphDep{on: on, policy: policies[r.IntN(len(policies))]})
		}
	}
	return g
}

// settledStates is the reference model: the state each node of g ends in.
// A node runs when every dependency COMPLETED, or ended otherwise
// (ARCHIVED, CANCELED) under CONTINUE; it then COMPLETES, or is ARCHIVED
// if designed to fail. A dependency that ended otherwise under
// CASCADE_CANCEL cancels it; under BLOCK it leaves it BLOCKED for good. A
// BLOCKED dependency never ends, so its dependents stay BLOCKED whatever
// their policy, unless another dependency cancels them: a cancel wins,
// as the engine applies it to a BLOCKED task whenever it comes.
func settledStates(g []graphNode) []conveyor.TaskState {
	out := make([]conveyor.TaskState, len(g))
	for i, nd := range g {
		var canceled, blocked bool
		for _, d := range nd.deps {
			switch s := out[d.on]; {
			case s == conveyor.TaskStateCompleted:
			case s == conveyor.TaskStateBlocked:
				blocked = true
			case d.policy == conveyor.OnFailureContinue:
			case d.policy == conveyor.OnFailureCascadeCancel:
				canceled = true
			default: // BLOCK, or unspecified
				blocked = true
			}
		}
		switch {
		case canceled:
			out[i] = conveyor.TaskStateCanceled
		case blocked:
			out[i] = conveyor.TaskStateBlocked
		case nd.fails:
			out[i] = conveyor.TaskStateArchived
		default:
			out[i] = conveyor.TaskStateCompleted
		}
	}
	return out
}

// ran reports whether a task that ends in s ran.
func ran(s conveyor.TaskState) bool {
	return s == conveyor.TaskStateCompleted || s == conveyor.TaskStateArchived
}

// TestDependencyGraphSettles enqueues a random (seeded) graph of 3,000
// tasks with mixed OnFailure policies through EnqueueTx, with workers
// already running, so that a dependency may be resolved at enqueue (it
// already ended; how many were is logged) as well as when it ends. Once the queue settles, every
// task's state is the reference model's, each task that should run ran
// once and the others never, every run started no earlier than each of
// its COMPLETED dependencies completed, and every TaskInfo reports its
// dependencies' final states and its dependents.
func TestDependencyGraphSettles(t *testing.T) {
	t.Parallel()
	const n, queue = 3000, "graph"
	seed := *graphSeed
	t.Logf("graph seed %d (rerun with -graph-seed=%d)", seed, seed)
	g := newGraph(rand.New(rand.NewPCG(seed, seed)), n)
	want := settledStates(g)
	counts := map[conveyor.TaskState]int{}
	for _, s := range want {
		counts[s]++
	}
	t.Logf("expected: %d completed, %d archived, %d canceled, %d blocked", counts[conveyor.TaskStateCompleted],
		counts[conveyor.TaskStateArchived], counts[conveyor.TaskStateCanceled], counts[conveyor.TaskStateBlocked])
	for _, s := range []conveyor.TaskState{conveyor.TaskStateCompleted, conveyor.TaskStateArchived, conveyor.TaskStateCanceled, conveyor.TaskStateBlocked} {
		if counts[s] < n/50 {
			t.Fatalf("the graph of seed %d ends only %d tasks %s: too few to test that outcome", seed, counts[s], s)
		}
	}

	e := wtSetup(t, server.Config{})
	client := newClient(t, e.srv.URL())
	byID := make(map[string]int, n)
	for i, nd := range g {
		byID[nd.id] = i
	}
	runs := make([]atomic.Int32, n)
	for range 4 {
		w := e.newWorker(conveyor.WithQueue(queue, 1), conveyor.WithConcurrency(16))
		w.HandleFunc("node", func(_ context.Context, d *conveyor.Delivery) error {
			i, ok := byID[d.ID]
			if !ok {
				return conveyor.SkipRetry(fmt.Errorf("task %s is not in the graph", d.ID))
			}
			runs[i].Add(1)
			if g[i].fails {
				return conveyor.SkipRetry(errors.New("designed to fail"))
			}
			return nil
		})
		wtRun(t, w)
	}

	ctx := context.Background()
	start := time.Now()
	atEnqueue := 0 // tasks with dependencies that did not start BLOCKED
	// Calls of 240 tasks (the limit is server.MaxBatchItems) end inside
	// workflows, and let the workers finish some tasks before the next
	// call enqueues tasks that depend on them.
	const txSize = 240
	for lo := 0; lo < n; lo += txSize {
		hi := min(lo+txSize, n)
		batch := make([]*conveyor.Task, 0, hi-lo)
		for _, nd := range g[lo:hi] {
			opts := []conveyor.TaskOption{conveyor.Queue(queue), conveyor.TaskID(nd.id), conveyor.ContentType("text/plain")}
			for _, d := range nd.deps {
				if d.policy == conveyor.OnFailureUnspecified {
					opts = append(opts, conveyor.DependsOn(g[d.on].id))
				} else {
					opts = append(opts, conveyor.DependsOn(g[d.on].id, d.policy))
				}
			}
			batch = append(batch, conveyor.NewTask("node", nil, opts...))
		}
		infos, err := client.EnqueueTx(ctx, batch)
		if err != nil {
			t.Fatalf("EnqueueTx of tasks %d..%d: %v", lo, hi-1, err)
		}
		for j, info := range infos {
			if len(g[lo+j].deps) > 0 && info.State != conveyor.TaskStateBlocked {
				atEnqueue++
			}
		}
	}
	// Settled: every task is terminal or BLOCKED and nothing is left to
	// run. The engine releases a task's dependents in the same critical
	// section as it ends the task, so the counts never show a gap between
	// the two.
	servertest.Eventually(t, 60*time.Second, "the graph settles", func() bool {
		q := e.queue(queue)
		return q.GetPending()+q.GetActive()+q.GetRetry()+q.GetScheduled() == 0 &&
			q.GetCompleted()+q.GetArchived()+q.GetCanceled()+q.GetBlocked() == n
	})
	t.Logf("3,000 tasks enqueued and settled in %s; %d dependents were resolved at enqueue",
		time.Since(start).Round(time.Millisecond), atEnqueue)

	infos := getAll(t, client, g)
	var bad int
	fail := func(format string, args ...any) {
		bad++
		if bad <= 20 {
			t.Errorf("seed %d: "+format, append([]any{seed}, args...)...)
		}
	}
	for i, nd := range g {
		info := infos[i]
		if info.State != want[i] {
			fail("task %d (%s) is %s, want %s; %s", i, nd.id, info.State, want[i], describeDeps(g, want, infos, i))
		}
		switch r := runs[i].Load(); {
		case ran(want[i]) && r != 1:
			fail("task %d (%s) ran %d times, want once", i, nd.id, r)
		case !ran(want[i]) && r != 0:
			fail("task %d (%s), %s, ran %d times, want never", i, nd.id, want[i], r)
		}
		if ran(want[i]) && info.StartedAt.IsZero() {
			fail("task %d (%s) ran but has no started_at", i, nd.id)
		}
		if want[i] != conveyor.TaskStateBlocked && info.CompletedAt.IsZero() {
			fail("task %d (%s), %s, has no completed_at", i, nd.id, info.State)
		}
		if len(info.DependsOn) != len(nd.deps) {
			fail("task %d (%s) reports %d dependencies, want %d", i, nd.id, len(info.DependsOn), len(nd.deps))
			continue
		}
		for j, d := range nd.deps {
			got, dep := info.DependsOn[j], infos[d.on]
			if got.TaskID != g[d.on].id || got.OnFailure != d.policy || got.State != want[d.on] {
				fail("task %d (%s) depends_on[%d] = %+v, want {%s %s %s}", i, nd.id, j, got, g[d.on].id, d.policy, want[d.on])
			}
			if ran(want[i]) && dep.State == conveyor.TaskStateCompleted && info.StartedAt.Before(dep.CompletedAt) {
				fail("task %d (%s) started at %s, %s before its dependency %d (%s) completed at %s",
					i, nd.id, info.StartedAt.Format(time.RFC3339Nano), dep.CompletedAt.Sub(info.StartedAt), d.on, g[d.on].id,
					dep.CompletedAt.Format(time.RFC3339Nano))
			}
		}
	}
	checkDependents(t, g, want, infos, fail)
	checkBlockedExamples(t, g, want, infos)
	if bad > 20 {
		t.Errorf("seed %d: %d mismatches in all, the first 20 shown", seed, bad)
	}
}

// getAll fetches every task of g, a few at a time.
func getAll(t *testing.T, c *conveyor.Client, g []graphNode) []*conveyor.TaskInfo {
	t.Helper()
	infos := make([]*conveyor.TaskInfo, len(g))
	errs := make([]error, len(g))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < len(g); i = int(next.Add(1) - 1) {
				infos[i], errs[i] = c.GetTask(context.Background(), g[i].id)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("GetTask: %v", err)
	}
	return infos
}

// checkDependents checks each task's TaskInfo.Dependents against the
// graph: the tasks that depend on it, with their states.
func checkDependents(t *testing.T, g []graphNode, want []conveyor.TaskState, infos []*conveyor.TaskInfo, fail func(string, ...any)) {
	t.Helper()
	dependents := make([]map[string]conveyor.TaskState, len(g))
	for i, nd := range g {
		for _, d := range nd.deps {
			if dependents[d.on] == nil {
				dependents[d.on] = map[string]conveyor.TaskState{}
			}
			dependents[d.on][nd.id] = want[i]
		}
	}
	for i, info := range infos {
		if len(info.Dependents) != len(dependents[i]) {
			fail("task %d (%s) reports %d dependents, want %d", i, g[i].id, len(info.Dependents), len(dependents[i]))
			continue
		}
		for _, l := range info.Dependents {
			if s, ok := dependents[i][l.TaskID]; !ok || s != l.State {
				fail("task %d (%s) reports dependent %s %s; the graph says %v (known: %v)", i, g[i].id, l.TaskID, l.State, s, ok)
			}
		}
	}
}

// checkBlockedExamples looks closely at two tasks the model has BLOCKED
// for good: one whose dependency was ARCHIVED under BLOCK, and one that
// waits on a dependency itself BLOCKED. Their TaskInfo.DependsOn states
// say why.
func checkBlockedExamples(t *testing.T, g []graphNode, want []conveyor.TaskState, infos []*conveyor.TaskInfo) {
	t.Helper()
	examples := []struct {
		what  string
		dep   conveyor.TaskState
		found bool
	}{{what: "an ARCHIVED dependency under BLOCK", dep: conveyor.TaskStateArchived}, {what: "a BLOCKED dependency", dep: conveyor.TaskStateBlocked}}
	for i, nd := range g {
		if want[i] != conveyor.TaskStateBlocked || len(infos[i].DependsOn) != len(nd.deps) {
			continue
		}
		for j, d := range nd.deps {
			for k := range examples {
				ex := &examples[k]
				if ex.found || want[d.on] != ex.dep || (ex.dep == conveyor.TaskStateArchived && !blocks(d.policy)) {
					continue
				}
				ex.found = true
				got := infos[i]
				t.Logf("task %d (%s) waits on %s: depends_on[%d] = %+v", i, nd.id, ex.what, j, got.DependsOn[j])
				if got.State != conveyor.TaskStateBlocked || got.DependsOn[j].State != ex.dep || got.DependsOn[j].TaskID != g[d.on].id {
					t.Errorf("task %d (%s) is %s with depends_on[%d] = %+v; want BLOCKED on %s, which is %s",
						i, nd.id, got.State, j, got.DependsOn[j], g[d.on].id, ex.dep)
				}
			}
		}
	}
	for _, ex := range examples {
		if !ex.found {
			t.Errorf("the graph has no BLOCKED task waiting on %s", ex.what)
		}
	}
}

// blocks reports whether policy leaves a dependent BLOCKED when its
// dependency fails.
func blocks(policy conveyor.OnFailure) bool {
	return policy == conveyor.OnFailureUnspecified || policy == conveyor.OnFailureBlock
}

// describeDeps lists task i's dependencies: index, policy, the model's
// state and the server's.
func describeDeps(g []graphNode, want []conveyor.TaskState, infos []*conveyor.TaskInfo, i int) string {
	s := "fails=" + strconv.FormatBool(g[i].fails)
	for _, d := range g[i].deps {
		s += fmt.Sprintf(" [%d %s: want %s, got %s]", d.on, d.policy, want[d.on], infos[d.on].State)
	}
	return s
}
