package server_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/conveyor-dev/conveyor/broker"
	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

// TestConcurrentEnqueuesKeepAnIdleSessionsWindow: enqueues that arrive at
// once at a session with nothing to do (on PostgreSQL each claims its
// slots of the lease the session parked, and leases them in its own
// transaction) never send the worker more than its concurrency, and every
// task is delivered once. The worker answers only once it holds its
// whole window, so a Dispatch that arrives while it does is one too many.
func TestConcurrentEnqueuesKeepAnIdleSessionsWindow(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	tasks := taskClient(t, s, servertest.GRPC)
	ctx := context.Background()
	const window, producers, rounds = 3, 12, 3
	w, _, err := openSession(t, s, servertest.GRPC, &conveyorv1.Hello{Queues: map[string]int32{"park": 1},
		Concurrency: window, SdkVersion: "test"})
	if err != nil {
		t.Fatal(err)
	}
	answer := func(id string) {
		w.send(&conveyorv1.WorkerMessage{Frame: &conveyorv1.WorkerMessage_Result{Result: &conveyorv1.Result{
			TaskId: id, Outcome: conveyorv1.TaskOutcome_TASK_OUTCOME_SUCCESS}}})
	}
	enqueue := func() string {
		res, err := tasks.Enqueue(ctx, connect.NewRequest(&conveyorv1.EnqueueRequest{Queue: "park", Type: "t"}))
		if err != nil {
			t.Error(err)
			return ""
		}
		return res.Msg.GetTask().GetId()
	}
	// The queue's first task, so that the engine knows the queue.
	first := enqueue()
	if d := w.next(10 * time.Second).GetDispatch(); d.GetTask().GetId() != first {
		t.Fatalf("first frame %v, want the Dispatch of %s", d, first)
	}
	answer(first)

	delivered := map[string]bool{}
	var held []string
	for range rounds {
		var wg sync.WaitGroup
		ids := make([]string, producers)
		for i := range producers {
			wg.Go(func() { ids[i] = enqueue() })
		}
		got := 0
		for got < producers {
			m := w.next(10 * time.Second)
			d := m.GetDispatch()
			if d == nil {
				t.Fatalf("frame %v, want a Dispatch", m)
			}
			if len(held) == window {
				t.Fatalf("a Dispatch of %s arrived while the worker held its window of %d: %v", d.GetTask().GetId(), window, held)
			}
			id := d.GetTask().GetId()
			if delivered[id] {
				t.Fatalf("task %s delivered twice", id)
			}
			delivered[id] = true
			held = append(held, id)
			got++
			if len(held) == window {
				answer(held[0])
				held = held[1:]
			}
		}
		wg.Wait()
		for _, id := range ids {
			if !delivered[id] {
				t.Fatalf("task %s enqueued, never delivered", id)
			}
		}
	}
	for _, id := range held {
		answer(id)
	}
	servertest.Eventually(t, 10*time.Second, "every task completed", func() bool {
		for id := range delivered {
			st, err := tasks.GetTask(ctx, connect.NewRequest(&conveyorv1.GetTaskRequest{Id: id}))
			if err != nil || st.Msg.GetState() != conveyorv1.TaskState_TASK_STATE_COMPLETED {
				return false
			}
		}
		return true
	})
}

// parkRecorder is an engine whose sessions park leases
// (broker.LeaseParker) that no enqueue claims: the test claims their
// slots and settles the claims itself, with leases it takes from the
// engine.
type parkRecorder struct {
	broker.Broker
	mu       sync.Mutex
	parked   map[string]*broker.ParkedLease
	unparked []string
}

func (p *parkRecorder) ParkLease(pl *broker.ParkedLease) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.parked[pl.Params.SessionID] = pl
}

func (p *parkRecorder) UnparkLease(pl *broker.ParkedLease) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.unparked = append(p.unparked, pl.Params.SessionID)
}

func (p *parkRecorder) lease(session string) *broker.ParkedLease {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.parked[session]
}

// TestClaimedSlotsAreNotTheSessions: the slots an enqueue's claim holds
// are not leased by the session while the claim is in its transaction;
// what the claim grants is sent once it settles, and a window it then
// fills is not passed. A session that ends with a claim in flight hands
// back what the claim grants, and unparks its lease.
func TestClaimedSlotsAreNotTheSessions(t *testing.T) {
	t.Parallel()
	pr := &parkRecorder{parked: map[string]*broker.ParkedLease{}}
	s := startWrapped(t, server.Config{}, func(b broker.Broker) broker.Broker { pr.Broker = b; return pr })
	tasks := taskClient(t, s, servertest.GRPC)
	ctx := context.Background()
	w, welcome, err := openSession(t, s, servertest.GRPC, &conveyorv1.Hello{Queues: map[string]int32{"q": 1},
		Concurrency: 3, SdkVersion: "test"})
	if err != nil {
		t.Fatal(err)
	}
	sid := welcome.GetSessionId()
	// claim claims n slots once the session offers them.
	claim := func(n int) broker.Claim {
		var c broker.Claim
		servertest.Eventually(t, 10*time.Second, "the session to offer its slots", func() bool {
			if pl := pr.lease(sid); pl != nil {
				c, _ = pl.Claim(n)
			}
			return c.N == n
		})
		return c
	}
	// settle leases n of the queue's tasks for the session, as an
	// enqueue's claim would, and settles c with them.
	settle := func(c broker.Claim, n int) {
		ls, err := pr.Lease(ctx, broker.LeaseParams{SessionID: sid, Picks: []broker.QueuePick{{Queue: "q", N: n}},
			Now: time.Now(), TTL: time.Minute})
		if err != nil || len(ls) != n {
			t.Fatalf("lease %d for the claim: %d, %v", n, len(ls), err)
		}
		pr.lease(sid).Settle(c, ls)
	}
	dispatched := func() string {
		t.Helper()
		m := w.next(10 * time.Second)
		if m.GetDispatch() == nil {
			t.Fatalf("frame %v, want a Dispatch", m)
		}
		return m.GetDispatch().GetTask().GetId()
	}

	c := claim(2)
	for range 4 {
		enqueue(t, tasks, &conveyorv1.EnqueueRequest{Queue: "q", Type: "t"})
	}
	held := []string{dispatched()} // the one slot the claim left the session
	settle(c, 2)
	held = append(held, dispatched(), dispatched())
	if st := queueStates(t, adminClient(t, s), "q"); st[conveyorv1.TaskState_TASK_STATE_ACTIVE] != 3 || st[conveyorv1.TaskState_TASK_STATE_PENDING] != 1 {
		t.Fatalf("with the window of 3 full: %v, want 3 ACTIVE and 1 PENDING", st)
	}
	w.send(&conveyorv1.WorkerMessage{Frame: &conveyorv1.WorkerMessage_Result{Result: &conveyorv1.Result{
		TaskId: held[0], Outcome: conveyorv1.TaskOutcome_TASK_OUTCOME_SUCCESS}}})
	dispatched() // the fourth, into the slot the Result freed

	// A claim in flight as the session ends: its lease goes back.
	w.send(&conveyorv1.WorkerMessage{Frame: &conveyorv1.WorkerMessage_Result{Result: &conveyorv1.Result{
		TaskId: held[1], Outcome: conveyorv1.TaskOutcome_TASK_OUTCOME_SUCCESS}}})
	c = claim(1)
	last := enqueue(t, tasks, &conveyorv1.EnqueueRequest{Queue: "q", Type: "t"})
	if err := w.stream.CloseRequest(); err != nil {
		t.Fatal(err)
	}
	servertest.Eventually(t, 10*time.Second, "the ending session to unpark its lease", func() bool {
		pr.mu.Lock()
		defer pr.mu.Unlock()
		return slices.Contains(pr.unparked, sid)
	})
	settle(c, 1) // the session waits for it in Close
	if err := <-w.end; !errors.Is(err, io.EOF) {
		t.Fatalf("stream end after close: %v", err)
	}
	got, err := tasks.GetTask(ctx, connect.NewRequest(&conveyorv1.GetTaskRequest{Id: last}))
	if err != nil || got.Msg.GetState() != conveyorv1.TaskState_TASK_STATE_PENDING || got.Msg.GetRetried() != 0 {
		t.Fatalf("the claim's task once its session ended: %v, %v; want PENDING, never retried", got.Msg, err)
	}
}

// releaseParkRecorder is a parkRecorder whose engine records releases.
type releaseParkRecorder struct {
	*parkRecorder
	broker.ReleaseRegistry
}

// TestParkingFollowsTheReleases: sessions of one release park their
// free slots as unversioned ones do; a session a newer release outranks
// on its queue takes them back while the newer one's are offered, and
// offers again once that release is drained, whose sessions then offer
// none.
func TestParkingFollowsTheReleases(t *testing.T) {
	t.Parallel()
	pr := &parkRecorder{parked: map[string]*broker.ParkedLease{}}
	s := startWrapped(t, server.Config{}, func(b broker.Broker) broker.Broker {
		pr.Broker = b
		return releaseParkRecorder{parkRecorder: pr, ReleaseRegistry: b.(broker.ReleaseRegistry)}
	})
	open := func(release string) string {
		t.Helper()
		_, welcome, err := openSession(t, s, servertest.GRPC, &conveyorv1.Hello{Queues: map[string]int32{"q": 1},
			Concurrency: 2, SdkVersion: "test", ReleaseId: release})
		if err != nil {
			t.Fatal(err)
		}
		return welcome.GetSessionId()
	}
	// offering waits until session's parked lease offers slots (want) or
	// offers none (!want).
	offering := func(session string, want bool) {
		t.Helper()
		servertest.Eventually(t, 10*time.Second, fmt.Sprintf("session %s offering slots: %v", session, want), func() bool {
			pl := pr.lease(session)
			return pl != nil && (pl.Open() > 0) == want
		})
	}

	old := open("r1")
	offering(old, true) // one release: it parks
	newer := open("r2")
	offering(newer, true)
	offering(old, false) // outranked on q by r2
	if _, err := adminClient(t, s).DrainRelease(context.Background(),
		connect.NewRequest(&conveyorv1.DrainReleaseRequest{ReleaseId: "r2"})); err != nil {
		t.Fatal(err)
	}
	offering(newer, false) // drained
	offering(old, true)    // no longer outranked
}
