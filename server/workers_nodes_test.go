package server_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"connectrpc.com/connect"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

// workersOf lists the workers s knows, by session id (nil on an error).
func workersOf(t *testing.T, s *servertest.Server) map[string]*conveyorv1.WorkerInfo {
	t.Helper()
	res, err := adminClient(t, s).ListWorkers(context.Background(), connect.NewRequest(&conveyorv1.ListWorkersRequest{}))
	if err != nil {
		t.Logf("ListWorkers: %v", err)
		return nil
	}
	out := map[string]*conveyorv1.WorkerInfo{}
	for i, w := range res.Msg.GetWorkers() {
		if i > 0 && res.Msg.GetWorkers()[i-1].GetSessionId() >= w.GetSessionId() {
			t.Errorf("workers not ordered by session id: %v", res.Msg.GetWorkers())
		}
		out[w.GetSessionId()] = w
	}
	return out
}

// TestListWorkersAcrossNodes runs two servers on one database, a worker
// on each: either lists both, each with the node it is on, the other's
// load as its node last wrote it; a session that ends leaves both lists;
// and each node's metrics carry its node id.
func TestListWorkersAcrossNodes(t *testing.T) {
	t.Parallel()
	if servertest.Engine() != servertest.EnginePostgres {
		t.Skip("several nodes share a PostgreSQL database; run with " + servertest.EnvEngine + "=" + servertest.EnginePostgres)
	}
	dir := t.TempDir()
	a := servertest.Start(t, server.Config{DataDir: dir})
	b := servertest.Start(t, server.Config{DataDir: dir})
	_, welcomeA, err := openSession(t, a, servertest.GRPC, &conveyorv1.Hello{Queues: map[string]int32{"qa": 1}, Concurrency: 2,
		SdkVersion: "test", Labels: map[string]string{"on": "a"}})
	if err != nil {
		t.Fatal(err)
	}
	wb, welcomeB, err := openSession(t, b, servertest.GRPC, &conveyorv1.Hello{Queues: map[string]int32{"qb": 3}, Concurrency: 4,
		SdkVersion: "test", Labels: map[string]string{"on": "b"}, BatchTypes: []string{"digest"},
		Types: []string{"digest", "mail"}, ReleaseId: "r7", StartAuthorization: true})
	if err != nil {
		t.Fatal(err)
	}
	res, err := taskClient(t, b, servertest.GRPC).Enqueue(context.Background(),
		connect.NewRequest(&conveyorv1.EnqueueRequest{Queue: "qb", Type: "mail", Payload: []byte("p")}))
	if err != nil {
		t.Fatal(err)
	}
	task := res.Msg.GetTask().GetId()
	if got := wb.next(10 * time.Second).GetDispatch().GetTask().GetId(); got != task {
		t.Fatalf("b's worker was sent %q, want %s", got, task)
	}

	idA, idB := welcomeA.GetSessionId(), welcomeB.GetSessionId()
	var lists [2]map[string]*conveyorv1.WorkerInfo
	for i, s := range []*servertest.Server{a, b} {
		// The other node's in-flight count arrives with its next loads'
		// write (every few seconds); its tasks are read as they are.
		servertest.Eventually(t, 30*time.Second, "both workers listed with b's load", func() bool {
			lists[i] = workersOf(t, s)
			return len(lists[i]) == 2 && lists[i][idB] != nil && lists[i][idB].GetInFlight() == 1
		})
	}
	nodeA, nodeB := lists[0][idA].GetNodeId(), lists[0][idB].GetNodeId()
	if nodeA == "" || nodeB == "" || nodeA == nodeB {
		t.Fatalf("nodes %q and %q: want two ids", nodeA, nodeB)
	}
	for i, l := range lists {
		if l[idA].GetNodeId() != nodeA || l[idB].GetNodeId() != nodeB {
			t.Errorf("list %d: nodes %q and %q, want %q and %q", i, l[idA].GetNodeId(), l[idB].GetNodeId(), nodeA, nodeB)
		}
		wa, wb := l[idA], l[idB]
		if wa.GetQueues()["qa"] != 1 || wa.GetConcurrency() != 2 || wa.GetLabels()["on"] != "a" || wa.GetInFlight() != 0 ||
			len(wa.GetTaskIds()) != 0 || wa.GetConnectedAt() == nil {
			t.Errorf("list %d: a's worker %v", i, wa)
		}
		if wb.GetQueues()["qb"] != 3 || wb.GetConcurrency() != 4 || wb.GetLabels()["on"] != "b" || wb.GetSdkVersion() != "test" ||
			!slices.Equal(wb.GetBatchTypes(), []string{"digest"}) || !slices.Equal(wb.GetTaskIds(), []string{task}) ||
			!slices.Equal(wb.GetTypes(), []string{"digest", "mail"}) || wb.GetReleaseId() != "r7" || !wb.GetStartAuthorization() {
			t.Errorf("list %d: b's worker %v", i, wb)
		}
	}

	for s, node := range map[*servertest.Server]string{a: nodeA, b: nodeB} {
		requireNodeLabel(t, s, node)
	}

	if err := wb.stream.CloseRequest(); err != nil {
		t.Fatal(err)
	}
	if err := <-wb.end; !errors.Is(err, io.EOF) {
		t.Fatalf("b's stream ended with %v, want its close", err)
	}
	for _, s := range []*servertest.Server{a, b} {
		servertest.Eventually(t, 30*time.Second, "b's worker gone from the list", func() bool {
			l := workersOf(t, s)
			return len(l) == 1 && l[idA] != nil
		})
	}
}

// TestMetricsNodeLabel checks that every series names the node it comes
// from on an engine several nodes share, and that none has a node label
// on the embedded engine (its dashboards stay as they were).
func TestMetricsNodeLabel(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	_, welcome, err := openSession(t, s, servertest.GRPC, &conveyorv1.Hello{Queues: map[string]int32{"q": 1}, Concurrency: 1, SdkVersion: "test"})
	if err != nil {
		t.Fatal(err)
	}
	w := workersOf(t, s)[welcome.GetSessionId()]
	if w == nil {
		t.Fatal("the worker is not listed")
	}
	if (w.GetNodeId() == "") != (servertest.Engine() == servertest.EngineBolt) {
		t.Fatalf("node id %q on engine %s", w.GetNodeId(), servertest.Engine())
	}
	requireNodeLabel(t, s, w.GetNodeId())
}

// requireNodeLabel fails unless every series of s has the node label
// node ("": none has a node label).
func requireNodeLabel(t *testing.T, s *servertest.Server, node string) {
	t.Helper()
	families := scrape(t, s)
	if len(families) == 0 {
		t.Fatal("no metrics")
	}
	for name, f := range families {
		for _, m := range f.GetMetric() {
			got, has := "", false
			for _, l := range m.GetLabel() {
				if l.GetName() == "node" {
					got, has = l.GetValue(), true
				}
			}
			if has != (node != "") || got != node {
				t.Fatalf("%s %v: node label %q (present %v), want %q", name, m.GetLabel(), got, has, node)
			}
		}
	}
}

// TestDrainAcrossNodes: a release drained through one node stops getting
// work on another within a registry tick.
func TestDrainAcrossNodes(t *testing.T) {
	t.Parallel()
	if servertest.Engine() != servertest.EnginePostgres {
		t.Skip("several nodes share a PostgreSQL database; run with " + servertest.EnvEngine + "=" + servertest.EnginePostgres)
	}
	dir := t.TempDir()
	a := servertest.Start(t, server.Config{DataDir: dir})
	b := servertest.Start(t, server.Config{DataDir: dir})
	_, welcome, err := openSession(t, b, servertest.GRPC, &conveyorv1.Hello{Queues: map[string]int32{"q": 1}, Concurrency: 1, ReleaseId: "v1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := adminClient(t, a).DrainRelease(context.Background(), connect.NewRequest(&conveyorv1.DrainReleaseRequest{ReleaseId: "v1"})); err != nil {
		t.Fatal(err)
	}
	servertest.Eventually(t, 20*time.Second, "node b sees v1 drained", func() bool {
		w := workersOf(t, b)[welcome.GetSessionId()]
		return w != nil && w.GetDraining()
	})
	onA, _, err := openSession(t, a, servertest.GRPC, &conveyorv1.Hello{Queues: map[string]int32{"q": 1}, Concurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	task := enqueue(t, taskClient(t, b, servertest.GRPC), &conveyorv1.EnqueueRequest{Queue: "q", Type: "t"})
	// The only other session is the drained one: the task reaching a's
	// proves b's was passed over.
	if got := onA.nextDispatch().GetTask().GetId(); got != task {
		t.Fatalf("the unversioned worker on a got %s, want %s", got, task)
	}
}

// TestPushWorkersAcrossNodes: on two nodes of one database only the
// leader invokes a queue's push endpoint, and either node lists that one
// consumer, on the leader's node; the other's idle consumer is not listed.
func TestPushWorkersAcrossNodes(t *testing.T) {
	t.Parallel()
	if servertest.Engine() != servertest.EnginePostgres {
		t.Skip("several nodes share a PostgreSQL database; run with " + servertest.EnvEngine + "=" + servertest.EnginePostgres)
	}
	dir := t.TempDir()
	a := servertest.Start(t, server.Config{DataDir: dir})
	b := servertest.Start(t, server.Config{DataDir: dir})
	endpoint := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) }))
	t.Cleanup(endpoint.Close)
	if _, err := adminClient(t, a).UpdateQueueConfig(context.Background(), connect.NewRequest(&conveyorv1.UpdateQueueConfigRequest{
		Config: &conveyorv1.QueueConfig{Queue: "pushed", Push: &conveyorv1.PushEndpoint{Url: endpoint.URL, Concurrency: 3}}})); err != nil {
		t.Fatal(err)
	}
	pushWorkers := func(s *servertest.Server) []*conveyorv1.WorkerInfo {
		var out []*conveyorv1.WorkerInfo
		for _, w := range workersOf(t, s) {
			if w.GetLabels()["push"] != "" {
				out = append(out, w)
			}
		}
		return out
	}
	var lists [2][]*conveyorv1.WorkerInfo
	for i, s := range []*servertest.Server{a, b} {
		// The leader's consumer reaches the other node with its next
		// registry write (every few seconds).
		servertest.Eventually(t, 30*time.Second, "the leader's push consumer listed", func() bool {
			lists[i] = pushWorkers(s)
			return len(lists[i]) == 1
		})
	}
	for i, l := range lists {
		if w := l[0]; w.GetSessionId() != "push:pushed" || w.GetLabels()["push"] != endpoint.URL || w.GetConcurrency() != 3 ||
			w.GetNodeId() == "" || w.GetNodeId() != lists[0][0].GetNodeId() {
			t.Errorf("node %d lists the push consumer as %v; want one, on the leader's node %s", i, w, lists[0][0].GetNodeId())
		}
	}
}
