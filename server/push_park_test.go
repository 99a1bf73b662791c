package server_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/conveyor-dev/conveyor/broker"
	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/gen/conveyor/v1/conveyorv1connect"
	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

// TestPushKeepsItsConcurrencyUnderConcurrentEnqueues: enqueues that
// arrive at once at an idle endpoint (on PostgreSQL each claims slots of
// the lease the endpoint parked, and leases them in its own transaction)
// never have more invocations in flight than its concurrency, and every
// task is invoked once.
func TestPushKeepsItsConcurrencyUnderConcurrentEnqueues(t *testing.T) {
	t.Parallel()
	env := startPushServer(t)
	const concurrency, producers, rounds = 3, 12, 3
	release := make(chan struct{}, producers*rounds)
	ep := startGatedEndpoint(t, release)
	if err := env.setPush(t, "park", ep.srv.URL, concurrency, 0); err != nil {
		t.Fatal(err)
	}
	release <- struct{}{}
	first := env.enqueue(t, "park", `{}`, nil) // so that the engine knows the queue
	env.waitTask(t, first, "completes", inState(conveyorv1.TaskState_TASK_STATE_COMPLETED))

	var ids []string
	for r := range rounds {
		round := make([]string, producers)
		var wg sync.WaitGroup
		for i := range producers {
			wg.Go(func() { round[i] = enqueueQuietly(t, env.tasks, "park") })
		}
		wg.Wait()
		ids = append(ids, round...)
		ep.waitCalls(1 + r*producers + concurrency) // the endpoint's window full
		for range producers {
			release <- struct{}{}
		}
	}
	for _, id := range ids {
		env.waitTask(t, id, "completes", inState(conveyorv1.TaskState_TASK_STATE_COMPLETED))
	}
	ep.check()
	ep.mu.Lock()
	defer ep.mu.Unlock()
	if ep.max > concurrency {
		t.Fatalf("%d invocations were in flight at once, more than the concurrency of %d", ep.max, concurrency)
	}
	seen := map[string]bool{}
	for _, c := range ep.calls {
		id := c.req.GetTask().GetId()
		if seen[id] {
			t.Fatalf("task %s invoked twice", id)
		}
		seen[id] = true
	}
	if len(seen) != len(ids)+1 {
		t.Fatalf("%d tasks invoked, want %d", len(seen), len(ids)+1)
	}
}

// enqueueQuietly enqueues a task on queue from any goroutine (t.Error,
// not t.Fatal), returning its id.
func enqueueQuietly(t *testing.T, tasks conveyorv1connect.TaskServiceClient, queue string) string {
	res, err := tasks.Enqueue(context.Background(), connect.NewRequest(&conveyorv1.EnqueueRequest{Queue: queue,
		Type: "push.test", Payload: []byte(`{}`)}))
	if err != nil {
		t.Error(err)
		return ""
	}
	return res.Msg.GetTask().GetId()
}

// TestPushParksItsFreeSlots: an endpoint parks a lease of its free slots
// (as a session does) under its own settings: it invokes what a claim of
// them is granted, parks anew when its timeout changes, and hands back,
// never counted as an attempt, what a claim grants once its endpoint is
// gone.
func TestPushParksItsFreeSlots(t *testing.T) {
	t.Parallel()
	pr := &parkRecorder{parked: map[string]*broker.ParkedLease{}}
	s := startWrapped(t, server.Config{}, func(b broker.Broker) broker.Broker { pr.Broker = b; return pr })
	env := newPushEnv(s)
	gate := make(chan struct{})
	openGate := sync.OnceFunc(func() { close(gate) })
	ep := startGatedEndpoint(t, gate)
	t.Cleanup(openGate)
	const sid = "push:hooks"
	ctx := context.Background()

	claims := map[*broker.ParkedLease]*bool{} // whether its one claim was settled
	// claim claims n slots of the endpoint's parked lease whose TTL is ttl,
	// once it offers them.
	claim := func(n int, ttl time.Duration) (*broker.ParkedLease, broker.Claim) {
		t.Helper()
		var pl *broker.ParkedLease
		var c broker.Claim
		servertest.Eventually(t, 10*time.Second, "the endpoint to offer its slots", func() bool {
			if pl = pr.lease(sid); pl != nil && pl.Params.TTL == ttl {
				c, _ = pl.Claim(n)
			}
			return c.N == n
		})
		settled := false
		claims[pl] = &settled
		// A test that fails first settles it with nothing, so that the
		// server's stop does not wait for it.
		t.Cleanup(func() {
			if !settled {
				pl.Settle(c, nil)
			}
		})
		p := pl.Params
		if !p.Push || len(p.Picks) != 1 || p.Picks[0].Queue != "hooks" {
			t.Fatalf("the endpoint parked %+v, want a push lease of queue hooks", p)
		}
		return pl, c
	}
	// settle leases n of the queue's tasks under the parked lease's
	// params, as an enqueue's claim would, and settles c with them.
	settle := func(pl *broker.ParkedLease, c broker.Claim, n int) map[string]uint64 {
		t.Helper()
		p := pl.Params
		p.Picks, p.Now = []broker.QueuePick{{Queue: "hooks", N: n}}, time.Now()
		ls, err := pr.Lease(ctx, p)
		if err != nil || len(ls) != n {
			t.Fatalf("lease %d for the claim: %d, %v", n, len(ls), err)
		}
		pl.Settle(c, ls)
		*claims[pl] = true
		tokens := map[string]uint64{}
		for _, l := range ls {
			tokens[l.Task.ID] = l.Token
		}
		return tokens
	}

	if err := env.setPush(t, "hooks", ep.srv.URL, 2, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	// A claim of one of the two slots: the endpoint leases one task itself.
	pl, c := claim(1, 5*time.Second+15*time.Second)
	var ids []string
	for range 3 {
		ids = append(ids, env.enqueue(t, "hooks", `{}`, nil))
	}
	ep.waitCalls(1)
	if st := queueStates(t, env.admin, "hooks"); st[conveyorv1.TaskState_TASK_STATE_ACTIVE] != 1 || st[conveyorv1.TaskState_TASK_STATE_PENDING] != 2 {
		t.Fatalf("with one slot of two claimed: %v, want 1 ACTIVE and 2 PENDING", st)
	}
	tokens := settle(pl, c, 1)
	ep.waitCalls(2)
	openGate()
	for _, id := range ids {
		env.waitTask(t, id, "completes", inState(conveyorv1.TaskState_TASK_STATE_COMPLETED))
	}
	// The claim's task invoked under the claim's lease (its attempt id
	// names the token).
	for _, call := range ep.waitCalls(3) {
		id, attempt := call.req.GetTask().GetId(), call.req.GetAttemptId()
		if tok, ok := tokens[id]; ok && !strings.HasSuffix(attempt, "-"+strconv.FormatUint(tok, 36)) {
			t.Fatalf("the endpoint was invoked with %s as attempt %s, want the claim's lease %d", id, attempt, tok)
		}
	}

	// A new timeout parks a new lease, with its TTL.
	if err := env.setPush(t, "hooks", ep.srv.URL, 2, 7*time.Second); err != nil {
		t.Fatal(err)
	}
	pl2, c := claim(2, 7*time.Second+15*time.Second) // all of them: the endpoint leases none itself
	if pl2 == pl {
		t.Fatal("the endpoint kept its parked lease across a change of timeout")
	}
	servertest.Eventually(t, 10*time.Second, "the old lease to be unparked", func() bool {
		pr.mu.Lock()
		defer pr.mu.Unlock()
		return slices.Contains(pr.unparked, sid)
	})

	// The endpoint removed with a claim in flight: what it grants goes back.
	last := env.enqueue(t, "hooks", `{}`, nil)
	pr.mu.Lock()
	unparked := len(pr.unparked)
	pr.mu.Unlock()
	if _, err := env.admin.UpdateQueueConfig(ctx, connect.NewRequest(&conveyorv1.UpdateQueueConfigRequest{
		Config: &conveyorv1.QueueConfig{Queue: "hooks", Push: &conveyorv1.PushEndpoint{}}})); err != nil {
		t.Fatal(err)
	}
	servertest.Eventually(t, 10*time.Second, "the removed endpoint to unpark its lease", func() bool {
		pr.mu.Lock()
		defer pr.mu.Unlock()
		return len(pr.unparked) > unparked
	})
	settle(pl2, c, 1) // the consumer waits for it in Close
	env.waitTask(t, last, "is handed back", func(ti *conveyorv1.TaskInfo) bool {
		return ti.GetState() == conveyorv1.TaskState_TASK_STATE_PENDING && ti.GetRetried() == 0
	})
	ep.mu.Lock()
	defer ep.mu.Unlock()
	if n := len(ep.calls); n != 3 {
		t.Fatalf("the endpoint received %d requests, want the first 3 tasks' only", n)
	}
}

// queueStates counts queue's tasks by state.
func queueStates(t *testing.T, admin conveyorv1connect.AdminServiceClient, queue string) map[conveyorv1.TaskState]int {
	t.Helper()
	res, err := admin.ListTasks(context.Background(), connect.NewRequest(&conveyorv1.ListTasksRequest{Queue: queue}))
	if err != nil {
		t.Fatal(err)
	}
	out := map[conveyorv1.TaskState]int{}
	for _, task := range res.Msg.GetTasks() {
		out[task.GetState()]++
	}
	return out
}
