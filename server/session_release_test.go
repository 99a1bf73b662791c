package server_test

import (
	"context"
	"slices"
	"testing"

	"connectrpc.com/connect"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

func releaseHello(id string, concurrency int32) *conveyorv1.Hello {
	return &conveyorv1.Hello{Queues: map[string]int32{"default": 1}, Concurrency: concurrency, SdkVersion: "test", ReleaseId: id}
}

func openRelease(t *testing.T, s *servertest.Server, id string, concurrency int32) *rawWorker {
	t.Helper()
	w, _, err := openSession(t, s, servertest.GRPC, releaseHello(id, concurrency))
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func listReleases(t *testing.T, s *servertest.Server) []*conveyorv1.ReleaseInfo {
	t.Helper()
	res, err := adminClient(t, s).ListReleases(context.Background(), connect.NewRequest(&conveyorv1.ListReleasesRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	return res.Msg.GetReleases()
}

// TestReleasePreferenceAndDrain: work goes to the newest release with
// room, the older only as fallback; the order is kept across a restart
// whatever order the sessions reconnect in; a drained release gets
// nothing new, across a restart too.
func TestReleasePreferenceAndDrain(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	tasks := taskClient(t, s, servertest.GRPC)
	v1 := openRelease(t, s, "v1", 4)
	v2 := openRelease(t, s, "v2", 1)

	first := enqueue(t, tasks, &conveyorv1.EnqueueRequest{Type: "t"})
	if d := v2.nextDispatch(); d.GetTask().GetId() != first {
		t.Fatalf("v2 got %s, want %s", d.GetTask().GetId(), first)
	}
	// v2 is full: the next goes to v1.
	second := enqueue(t, tasks, &conveyorv1.EnqueueRequest{Type: "t"})
	if d := v1.nextDispatch(); d.GetTask().GetId() != second {
		t.Fatalf("v1 got %s, want %s (v2 has no room)", d.GetTask().GetId(), second)
	}

	s = servertest.Restart(t, s)
	tasks = taskClient(t, s, servertest.GRPC)
	v2 = openRelease(t, s, "v2", 4) // reconnects first: the order is by first sight
	v1 = openRelease(t, s, "v1", 4)
	got := map[string]bool{}
	for range 2 { // the two redelivered tasks
		got[v2.nextDispatch().GetTask().GetId()] = true
	}
	if !got[first] || !got[second] {
		t.Fatalf("after the restart v2 got %v, want both %s and %s", got, first, second)
	}

	if _, err := adminClient(t, s).DrainRelease(context.Background(), connect.NewRequest(&conveyorv1.DrainReleaseRequest{ReleaseId: "v2"})); err != nil {
		t.Fatal(err)
	}
	third := enqueue(t, tasks, &conveyorv1.EnqueueRequest{Type: "t"})
	if d := v1.nextDispatch(); d.GetTask().GetId() != third {
		t.Fatalf("v1 got %s, want %s (v2 drained)", d.GetTask().GetId(), third)
	}
	rs := listReleases(t, s)
	if len(rs) != 2 || rs[0].GetReleaseId() != "v2" || !rs[0].GetDraining() || rs[1].GetReleaseId() != "v1" || rs[1].GetDraining() ||
		rs[0].GetSessions() != 1 || rs[1].GetSessions() != 1 {
		t.Fatalf("ListReleases = %v, want v2 (draining) then v1, one session each", rs)
	}
	res, err := adminClient(t, s).ListWorkers(context.Background(), connect.NewRequest(&conveyorv1.ListWorkersRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	var drained []string
	for _, w := range res.Msg.GetWorkers() {
		if w.GetDraining() {
			drained = append(drained, w.GetReleaseId())
		}
	}
	if !slices.Equal(drained, []string{"v2"}) {
		t.Fatalf("draining workers' releases: %v, want [v2]", drained)
	}
	f := scrape(t, s)
	if v := value(f, "conveyor_release_sessions", "release=v2", "draining=true"); v != 1 {
		t.Errorf("conveyor_release_sessions{v2, draining} = %v, want 1", v)
	}
	if v := value(f, "conveyor_release_sessions", "release=v1", "draining=false"); v != 1 {
		t.Errorf("conveyor_release_sessions{v1} = %v, want 1", v)
	}

	s = servertest.Restart(t, s)
	tasks = taskClient(t, s, servertest.GRPC)
	openRelease(t, s, "v2", 4)
	v1 = openRelease(t, s, "v1", 4)
	for range 3 { // the redeliveries, and v2 still drained
		v1.nextDispatch()
	}
	fourth := enqueue(t, tasks, &conveyorv1.EnqueueRequest{Type: "t"})
	if d := v1.nextDispatch(); d.GetTask().GetId() != fourth {
		t.Fatalf("v1 got %s, want %s", d.GetTask().GetId(), fourth)
	}
}

// TestReleaseTypedFallback: an older release keeps the types the newer
// one cannot take.
func TestReleaseTypedFallback(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	tasks := taskClient(t, s, servertest.GRPC)
	old := releaseHello("v1", 4)
	old.Types = []string{"a", "b"}
	wOld, _, err := openSession(t, s, servertest.GRPC, old)
	if err != nil {
		t.Fatal(err)
	}
	nu := releaseHello("v2", 4)
	nu.Types = []string{"a"}
	wNew, _, err := openSession(t, s, servertest.GRPC, nu)
	if err != nil {
		t.Fatal(err)
	}
	a := enqueue(t, tasks, &conveyorv1.EnqueueRequest{Type: "a"})
	b := enqueue(t, tasks, &conveyorv1.EnqueueRequest{Type: "b"})
	if d := wNew.nextDispatch(); d.GetTask().GetId() != a {
		t.Fatalf("v2 got %s (%s), want the a", d.GetTask().GetId(), d.GetTask().GetType())
	}
	if d := wOld.nextDispatch(); d.GetTask().GetId() != b {
		t.Fatalf("v1 got %s (%s), want the b", d.GetTask().GetId(), d.GetTask().GetType())
	}
}
