package server_test

import (
	"context"
	"fmt"
	"slices"
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

// warmingBroker is an engine that would be warmed for its sessions'
// routes (broker.LeaseWarmer): it records each WarmLeases call, and what
// the admin service listed while the call ran.
type warmingBroker struct {
	broker.Broker
	listed func() int

	mu     sync.Mutex
	routes []broker.Route
	seen   []int
}

func (w *warmingBroker) WarmLeases(_ context.Context, r broker.Route) {
	n := w.listed()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.routes = append(w.routes, r)
	w.seen = append(w.seen, n)
}

// TestSessionWarmsTheEngineBeforeItIsListed: a session names its route
// to an engine that warms for it (broker.LeaseWarmer) when it opens, and
// before it is listed or welcomed, so that the first tasks it is sent do
// not wait for the warm-up.
func TestSessionWarmsTheEngineBeforeItIsListed(t *testing.T) {
	t.Parallel()
	wb := &warmingBroker{}
	s := startWrapped(t, server.Config{}, func(b broker.Broker) broker.Broker { wb.Broker = b; return wb })
	admin := adminClient(t, s)
	wb.listed = func() int {
		res, err := admin.ListWorkers(context.Background(), connect.NewRequest(&conveyorv1.ListWorkersRequest{}))
		if err != nil {
			t.Errorf("ListWorkers: %v", err)
			return -1
		}
		return len(res.Msg.GetWorkers())
	}
	_, _, err := openSession(t, s, servertest.GRPC, &conveyorv1.Hello{Queues: map[string]int32{"q": 1}, Concurrency: 1,
		Types: []string{"b", "a"}, StartAuthorization: true})
	if err != nil {
		t.Fatal(err)
	}
	if n := wb.listed(); n != 1 {
		t.Fatalf("%d sessions listed once the session was welcomed, want 1", n)
	}
	wb.mu.Lock()
	defer wb.mu.Unlock()
	want := broker.WorkerRoute([]string{"b", "a"}, nil, true)
	if len(wb.routes) != 1 || !slices.Equal(wb.routes[0].Types, want.Types) || wb.routes[0].StartAuthorization != want.StartAuthorization {
		t.Fatalf("WarmLeases was told %+v, want once %+v", wb.routes, want)
	}
	if wb.seen[0] != 0 {
		t.Fatalf("%d sessions were listed while the engine warmed, want 0: the session was listed first", wb.seen[0])
	}
}

// warmRecorder records, in order, the routes its engine is told to warm
// for and the push endpoints' leases, and keeps its engine's releases
// (broker.ReleaseRegistry).
type warmRecorder struct {
	broker.Broker

	mu     sync.Mutex
	events []string
}

// warmEvent is what warmRecorder records of a WarmLeases call for r.
func warmEvent(r broker.Route) string {
	return fmt.Sprintf("warm types=%v except=%v authorization=%v", r.Types, r.Except, r.StartAuthorization)
}

func (b *warmRecorder) WarmLeases(_ context.Context, r broker.Route) {
	b.record(warmEvent(r))
}

func (b *warmRecorder) Lease(ctx context.Context, p broker.LeaseParams) ([]broker.Lease, error) {
	if p.Push {
		b.record("push lease")
	}
	return b.Broker.Lease(ctx, p)
}

func (b *warmRecorder) record(event string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.events = append(b.events, event)
}

func (b *warmRecorder) recorded() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.events)
}

func (b *warmRecorder) SeeRelease(ctx context.Context, id string, now time.Time) (broker.Release, error) {
	return b.Broker.(broker.ReleaseRegistry).SeeRelease(ctx, id, now)
}

func (b *warmRecorder) DrainRelease(ctx context.Context, id string) (broker.Release, error) {
	return b.Broker.(broker.ReleaseRegistry).DrainRelease(ctx, id)
}

func (b *warmRecorder) Releases(ctx context.Context) ([]broker.Release, error) {
	return b.Broker.(broker.ReleaseRegistry).Releases(ctx)
}

// TestPushEndpointWarmsTheEngineBeforeItLeases: a queue's push endpoint
// names its route (the zero one) to an engine that warms for it before
// it leases its first task, as a worker's session does.
func TestPushEndpointWarmsTheEngineBeforeItLeases(t *testing.T) {
	t.Parallel()
	wb := &warmRecorder{}
	s := startWrapped(t, server.Config{}, func(b broker.Broker) broker.Broker { wb.Broker = b; return wb })
	hc := servertest.HTTPClient()
	env := &pushEnv{s: s, tasks: conveyorv1connect.NewTaskServiceClient(hc, s.URL()),
		admin: conveyorv1connect.NewAdminServiceClient(hc, s.URL())}
	ep := startEndpoint(t, nil, echoAnswer)
	if err := env.setPush(t, "hooks", ep.srv.URL+"/tasks", 1, 0); err != nil {
		t.Fatalf("UpdateQueueConfig: %v", err)
	}
	id := env.enqueue(t, "hooks", `{"n":1}`, nil)
	env.waitTask(t, id, "completes", inState(conveyorv1.TaskState_TASK_STATE_COMPLETED))

	events := wb.recorded()
	lease := slices.Index(events, "push lease")
	if lease < 0 {
		t.Fatalf("no push lease recorded: %q", events)
	}
	zero := warmEvent(broker.Route{})
	if warm := slices.Index(events, zero); warm < 0 || warm > lease {
		t.Fatalf("events %q: want %q before the first push lease", events, zero)
	}
}

// TestNewerReleaseWarmsTheOlderSessionsNarrowedRoutes: a session of a
// newer release takes its types from the older sessions of its queues,
// whose leases then walk fewer types (a lease statement of another
// shape): the engine is told that route when the newer session opens,
// not at the older session's first lease by it.
func TestNewerReleaseWarmsTheOlderSessionsNarrowedRoutes(t *testing.T) {
	t.Parallel()
	wb := &warmRecorder{}
	s := startWrapped(t, server.Config{}, func(b broker.Broker) broker.Broker { wb.Broker = b; return wb })
	open := func(release string, types ...string) {
		t.Helper()
		if _, _, err := openSession(t, s, servertest.GRPC, &conveyorv1.Hello{Queues: map[string]int32{"q": 1}, Concurrency: 1,
			Types: types, ReleaseId: release}); err != nil {
			t.Fatal(err)
		}
	}
	open("v1", "a", "b")
	open("v2", "b")
	narrowed := warmEvent(broker.Route{Types: []string{"a"}})
	servertest.Eventually(t, 10*time.Second, "the older session's route without b warmed", func() bool {
		return slices.Contains(wb.recorded(), narrowed)
	})
}
