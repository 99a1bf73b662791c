package conveyor_test

import (
	"context"
	"testing"
	"time"

	"github.com/conveyor-dev/conveyor/internal/testwait"
	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
)

// TestInspectorGroups: tasks enqueued into a group are listed as one
// waiting group.
func TestInspectorGroups(t *testing.T) {
	t.Parallel()
	b := inspSetup(t)
	b.enqueue("digest", conveyor.Queue("digests"), conveyor.Group("daily"))
	b.enqueue("digest", conveyor.Queue("digests"), conveyor.Group("daily"))
	b.enqueue("digest", conveyor.Queue("other"), conveyor.Group("daily"))

	gs, err := b.insp.ListGroups(b.ctx, "digests")
	if err != nil || len(gs) != 1 {
		t.Fatalf("ListGroups(digests): %v %+v", err, gs)
	}
	g := gs[0]
	eq(t, "group queue", g.Queue, "digests")
	eq(t, "group key", g.Group, "daily")
	eq(t, "group type", g.Type, "digest")
	eq(t, "group size", g.Size, 2)
	if g.FirstEnqueuedAt.IsZero() || g.LastEnqueuedAt.Before(g.FirstEnqueuedAt) || !g.FiresAt.After(g.FirstEnqueuedAt) {
		t.Errorf("group times: %+v", g)
	}
	if gs, err = b.insp.ListGroups(b.ctx, ""); err != nil || len(gs) != 2 {
		t.Fatalf("ListGroups of every queue: %v %+v", err, gs)
	}
	_, err = b.insp.ListGroups(b.ctx, "no good")
	wantIs(t, "ListGroups of an invalid queue", err, conveyor.ErrInvalidArgument)
}

// TestInspectorWorkersAndReleases: a running Worker is listed with what
// its session declared, its release is listed, and draining the release
// marks both.
func TestInspectorWorkersAndReleases(t *testing.T) {
	t.Parallel()
	b := inspSetup(t)
	w := wtNewWorker(t, b.srv.URL(), conveyor.WithQueue("work", 3), conveyor.WithConcurrency(2),
		conveyor.WithReleaseID("build-7"), conveyor.WithLabels(map[string]string{"host": "a"}))
	w.HandleFunc("t", func(context.Context, *conveyor.Delivery) error { return nil })
	wtRun(t, w)

	var ws []*conveyor.WorkerInfo
	testwait.Until(t, 10*time.Second, "the worker's session listed", func() bool {
		var err error
		ws, err = b.insp.ListWorkers(b.ctx)
		return err == nil && len(ws) == 1
	})
	got := ws[0]
	eq(t, "worker queue weight", got.Queues["work"], 3)
	eq(t, "worker concurrency", got.Concurrency, 2)
	eq(t, "worker release", got.ReleaseID, "build-7")
	eq(t, "worker label", got.Labels["host"], "a")
	eq(t, "worker SDK version", got.SDKVersion, conveyor.Version)
	eq(t, "worker types", len(got.Types), 1)
	eq(t, "worker draining", got.Draining, false)
	if got.SessionID == "" || got.ConnectedAt.IsZero() {
		t.Errorf("worker session: %+v", got)
	}

	rs, err := b.insp.ListReleases(b.ctx)
	if err != nil || len(rs) != 1 || rs[0].ReleaseID != "build-7" || rs[0].Sessions != 1 || rs[0].Draining || rs[0].FirstSeenAt.IsZero() {
		t.Fatalf("ListReleases: %v %+v", err, rs)
	}
	if err := b.insp.DrainRelease(b.ctx, "build-7"); err != nil {
		t.Fatalf("DrainRelease: %v", err)
	}
	if rs, err = b.insp.ListReleases(b.ctx); err != nil || !rs[0].Draining {
		t.Fatalf("ListReleases after DrainRelease: %v %+v", err, rs)
	}
	if ws, err = b.insp.ListWorkers(b.ctx); err != nil || len(ws) != 1 || !ws[0].Draining {
		t.Fatalf("ListWorkers after DrainRelease: %v %+v", err, ws)
	}
	if err := b.insp.DrainRelease(b.ctx, "build-7"); err != nil {
		t.Fatalf("DrainRelease again: %v", err)
	}
	wantIs(t, "DrainRelease of a release never seen", b.insp.DrainRelease(b.ctx, "build-0"), conveyor.ErrNotFound)
	wantIs(t, "DrainRelease of no release", b.insp.DrainRelease(b.ctx, ""), conveyor.ErrInvalidArgument)
}

// TestInspectorClusterInfo: the one node of a test server is described,
// and its engine's counts hold the tasks enqueued.
func TestInspectorClusterInfo(t *testing.T) {
	t.Parallel()
	b := inspSetup(t)
	b.enqueue("t")
	b.enqueue("t", conveyor.ProcessIn(time.Hour))

	c, err := b.insp.GetClusterInfo(b.ctx)
	if err != nil {
		t.Fatalf("GetClusterInfo: %v", err)
	}
	if len(c.Nodes) != 1 || !c.Nodes[0].Leader || c.Nodes[0].StartedAt.IsZero() || c.StorageEngine == "" || c.Uptime <= 0 {
		t.Errorf("GetClusterInfo = %+v", c)
	}
	info, err := b.insp.GetBrokerInfo(b.ctx)
	if err != nil {
		t.Fatalf("GetBrokerInfo: %v", err)
	}
	eq(t, "broker engine", info.Engine, c.StorageEngine)
	eq(t, "pending tasks", info.TaskCounts[conveyor.TaskStatePending.String()], 1)
	eq(t, "scheduled tasks", info.TaskCounts[conveyor.TaskStateScheduled.String()], 1)
	if info.DataPath == "" {
		t.Errorf("GetBrokerInfo = %+v", info)
	}
}
