package server_test

import (
	"context"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/conveyor-dev/conveyor/broker"
	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/gen/conveyor/v1/conveyorv1connect"
	"github.com/conveyor-dev/conveyor/scheduler"
	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

// hookBroker wraps the real engine so that a test can run another actor's
// call at an exact point of a session's send loop: just before its Lease,
// or just after its LeaseGroups returns.
type hookBroker struct {
	broker.Broker
	beforeLease      func(ctx context.Context, inner broker.Broker, p broker.LeaseParams)
	afterLeaseGroups func(ctx context.Context, out []broker.GroupLease)
	leaseCalls       atomic.Int32
}

func (h *hookBroker) Lease(ctx context.Context, p broker.LeaseParams) ([]broker.Lease, error) {
	h.leaseCalls.Add(1)
	if h.beforeLease != nil {
		h.beforeLease(ctx, h.Broker, p)
	}
	return h.Broker.Lease(ctx, p)
}

func (h *hookBroker) LeaseGroups(ctx context.Context, p broker.GroupLeaseParams) ([]broker.GroupLease, error) {
	out, err := h.Broker.LeaseGroups(ctx, p)
	if h.afterLeaseGroups != nil {
		h.afterLeaseGroups(ctx, out)
	}
	return out, err
}

// startHooked starts a server whose broker is the bbolt engine behind hb.
// Set hb's hooks before the first session opens.
func startHooked(t *testing.T, cfg server.Config, hb *hookBroker) *servertest.Server {
	t.Helper()
	return startWrapped(t, cfg, func(b broker.Broker) broker.Broker { hb.Broker = b; return hb })
}

// startWrapped starts a server on the bbolt engine as wrap returns it: a
// test double that watches, or steps into, the calls the server makes.
func startWrapped(t *testing.T, cfg server.Config, wrap func(broker.Broker) broker.Broker) *servertest.Server {
	t.Helper()
	cfg.DataDir = t.TempDir()
	open := server.OpenBolt(filepath.Join(cfg.DataDir, server.DataFile))
	cfg.OpenBroker = func(o server.BrokerOptions) (broker.Broker, error) {
		b, err := open(o)
		if err != nil {
			return nil, err
		}
		return wrap(b), nil
	}
	return servertest.Start(t, cfg)
}

func enqueue(t *testing.T, tasks interface {
	Enqueue(context.Context, *connect.Request[conveyorv1.EnqueueRequest]) (*connect.Response[conveyorv1.EnqueueResponse], error)
}, req *conveyorv1.EnqueueRequest) string {
	t.Helper()
	res, err := tasks.Enqueue(context.Background(), connect.NewRequest(req))
	if err != nil {
		t.Fatal(err)
	}
	return res.Msg.GetTask().GetId()
}

// TestEmptyLeaseLooksAtTheOtherQueues: the send loop plans from the ready
// counts, picks only queue a (its weight), and another session takes a's
// one task between the plan and the Lease, which comes back empty. The
// session must still be sent queue b's ready task: b became ready before
// the session opened, so no later TasksReady will wake it.
func TestEmptyLeaseLooksAtTheOtherQueues(t *testing.T) {
	t.Parallel()
	var once sync.Once
	hb := &hookBroker{}
	hb.beforeLease = func(ctx context.Context, inner broker.Broker, p broker.LeaseParams) {
		if p.SessionID == "other" || len(p.Picks) != 1 || p.Picks[0].Queue != "a" {
			return
		}
		once.Do(func() {
			ls, err := inner.Lease(ctx, broker.LeaseParams{SessionID: "other",
				Picks: []broker.QueuePick{{Queue: "a", N: 1}}, Now: p.Now, TTL: time.Hour})
			if err != nil || len(ls) != 1 {
				t.Errorf("the other session's lease of a: %d leases, %v", len(ls), err)
			}
		})
	}
	s := startHooked(t, server.Config{}, hb)
	tasks := taskClient(t, s, servertest.GRPC)
	enqueue(t, tasks, &conveyorv1.EnqueueRequest{Queue: "a", Type: "t"})
	b := enqueue(t, tasks, &conveyorv1.EnqueueRequest{Queue: "b", Type: "t"})
	w, _, err := openSession(t, s, servertest.GRPC, &conveyorv1.Hello{Queues: map[string]int32{"a": 10, "b": 1}, Concurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	d := w.next(10 * time.Second).GetDispatch()
	if d.GetTask().GetId() != b {
		t.Fatalf("got %v, want the Dispatch of b's task %s", d, b)
	}
}

// TestGroupsLeasedTogetherAreReleasedWhenTheSessionEnds: one LeaseGroups
// call returns three groups, and the session ends (the worker breaks the
// protocol) before they are sent. The safety net (protocol §5.10) must
// release every one of them at once, with no retry counted, not just the
// first: the lease TTL is a minute, so a lapse cannot be what frees them.
func TestGroupsLeasedTogetherAreReleasedWhenTheSessionEnds(t *testing.T) {
	t.Parallel()
	hb := &hookBroker{}
	streams := make(chan *connect.BidiStreamForClient[conveyorv1.WorkerMessage, conveyorv1.ServerMessage], 1)
	var once sync.Once
	leased := make(chan []string, 1)
	hb.afterLeaseGroups = func(ctx context.Context, out []broker.GroupLease) {
		if len(out) < 3 {
			return
		}
		once.Do(func() {
			var ids []string
			for _, gl := range out {
				for _, l := range gl.Leases {
					ids = append(ids, l.Task.ID)
				}
			}
			leased <- ids
			// A Credit of 0 ends the session (invalid_argument); its
			// context, ctx, ends only once the session has.
			if err := (<-streams).Send(&conveyorv1.WorkerMessage{Frame: &conveyorv1.WorkerMessage_Credit{
				Credit: &conveyorv1.Credit{N: 0}}}); err != nil {
				t.Errorf("send the bad Credit: %v", err)
			}
			select {
			case <-ctx.Done():
			case <-time.After(10 * time.Second):
				t.Error("the session did not end within 10s of the bad Credit")
			}
		})
	}
	// MaxSessionBytes is raised so that one burst may lease three groups.
	s := startHooked(t, server.Config{LeaseTTL: time.Minute, MaxSessionBytes: 1 << 30,
		GroupPolicy: brokerGroupPolicy(1, time.Hour, time.Hour)}, hb)
	tasks := taskClient(t, s, servertest.GRPC)
	for range 3 {
		enqueue(t, tasks, &conveyorv1.EnqueueRequest{Queue: "q", Type: "sum", Options: &conveyorv1.TaskOptions{Group: "g"}})
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream := conveyorv1connect.NewWorkerServiceClient(servertest.HTTPClient(), s.URL(), connect.WithGRPC()).Session(ctx)
	streams <- stream
	if err := stream.Send(&conveyorv1.WorkerMessage{Frame: &conveyorv1.WorkerMessage_Hello{Hello: &conveyorv1.Hello{
		Queues: map[string]int32{"q": 1}, Concurrency: 3, BatchTypes: []string{"sum"}}}}); err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			if _, err := stream.Receive(); err != nil {
				return
			}
		}
	}()
	var ids []string
	select {
	case ids = <-leased:
	case <-time.After(10 * time.Second):
		t.Fatal("the session never leased the three groups in one call")
	}
	for _, id := range ids {
		servertest.Eventually(t, 10*time.Second, "member "+id+" released with no retry", func() bool {
			got, err := tasks.GetTask(context.Background(), connect.NewRequest(&conveyorv1.GetTaskRequest{Id: id}))
			if err != nil {
				t.Fatal(err)
			}
			return got.Msg.GetState() == conveyorv1.TaskState_TASK_STATE_PENDING && got.Msg.GetRetried() == 0
		})
	}
}

// TestCancelGoesOutBeforeTheRedelivery: the reaper takes back task x's
// lease while the session's send loop is between its Ready and its Lease,
// and that Lease returns x again (priority 9, ahead of the task that woke
// the loop). The worker must be sent Cancel(x) before x's new Dispatch
// (docs/protocol.md §6.8): Cancel names only the task, so a worker sent
// them the other way round would cancel the fresh attempt.
func TestCancelGoesOutBeforeTheRedelivery(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	hb := &hookBroker{}
	hb.beforeLease = func(ctx context.Context, inner broker.Broker, p broker.LeaseParams) {
		if calls.Add(1) != 2 {
			return
		}
		// The reaper's own steps, as if every lease had expired.
		at := p.Now.Add(2 * time.Hour)
		lapsed, _, err := inner.LapsedLeases(ctx, at)
		if err != nil || len(lapsed) != 1 {
			t.Errorf("lapsed leases: %v, %v; want x's one", lapsed, err)
			return
		}
		if err := inner.Reclaim(ctx, []broker.Decision{scheduler.Retrier{}.AfterLapse(lapsed[0], at)}); err != nil {
			t.Error(err)
		}
	}
	s := startHooked(t, server.Config{}, hb)
	tasks := taskClient(t, s, servertest.GRPC)
	x := enqueue(t, tasks, &conveyorv1.EnqueueRequest{Queue: "q", Type: "t", Options: &conveyorv1.TaskOptions{Priority: 9}})
	w, _, err := openSession(t, s, servertest.GRPC, &conveyorv1.Hello{Queues: map[string]int32{"q": 1}, Concurrency: 2})
	if err != nil {
		t.Fatal(err)
	}
	if d := w.next(10 * time.Second).GetDispatch(); d.GetTask().GetId() != x {
		t.Fatalf("got %v, want the Dispatch of x %s", d, x)
	}
	// Wakes the send loop, whose Lease (its second) the reaper precedes.
	enqueue(t, tasks, &conveyorv1.EnqueueRequest{Queue: "q", Type: "t", Options: &conveyorv1.TaskOptions{Priority: 1}})
	if c := w.next(10 * time.Second); c.GetCancel().GetTaskId() != x {
		t.Fatalf("got %v, want Cancel(x) first", c)
	}
	if d := w.next(10 * time.Second).GetDispatch(); d.GetTask().GetId() != x || d.GetTask().GetRetried() != 1 {
		t.Fatalf("got %v, want x's redelivery, retried 1", d)
	}
}
