package postgres_test

import (
	"testing"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
	bt "github.com/conveyor-dev/conveyor/broker/brokertest"
	"github.com/conveyor-dev/conveyor/broker/postgres"
	"github.com/conveyor-dev/conveyor/internal/pgtest"
)

// TestCopyCarriesStartAuthorization: a copy keeps a task at most once,
// and an ACTIVE at-most-once task whose start was authorized (its server
// stopped while it ran) is archived, its outcome unknown, when an engine
// opens on the copy, as it would have been on the source: never run again.
func TestCopyCarriesStartAuthorization(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	from, to := pgtest.Schema(t, t.Name()+"/from"), pgtest.Schema(t, t.Name()+"/to")
	src, err := postgres.Open(t.Context(), postgres.Config{URL: url, Schema: from, MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = src.Close() })
	now := time.Now()
	amo := bt.NewTask("q")
	amo.AtMostOnce = true
	res, err := src.Enqueue(t.Context(), broker.EnqueueParams{Now: now, Tasks: bt.WithStates([]broker.NewTask{amo, amo}, now)})
	if err != nil || res[0].Err != nil || res[1].Err != nil {
		t.Fatalf("Enqueue: %+v, %v", res, err)
	}
	ls, err := src.Lease(t.Context(), broker.LeaseParams{SessionID: "s", Now: now, TTL: time.Hour,
		Picks: []broker.QueuePick{{Queue: "q", N: 1}}, Route: broker.Route{StartAuthorization: true}})
	if err != nil || len(ls) != 1 {
		t.Fatalf("Lease: %d, %v", len(ls), err)
	}
	started := ls[0].Task.ID
	waiting := res[0].Task.ID
	if waiting == started {
		waiting = res[1].Task.ID
	}
	if err := src.AuthorizeStart(t.Context(), broker.StartParams{SessionID: "s", Now: now,
		Lease: broker.LeaseRef{TaskID: started, Token: ls[0].Token}}); err != nil {
		t.Fatal(err)
	}
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}

	copyStore(t, url, from, to)

	dst, err := postgres.Open(t.Context(), postgres.Config{URL: url, Schema: to, MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dst.Close() })
	task := bt.RequireState(t, dst, started, broker.StateArchived)
	if task.LastError != broker.OutcomeUnknownPrefix+broker.UnknownRestart || !task.AtMostOnce {
		t.Fatalf("the authorized task on the copy: last_error %q, at most once %v", task.LastError, task.AtMostOnce)
	}
	if task := bt.RequireState(t, dst, waiting, broker.StatePending); !task.AtMostOnce {
		t.Fatal("the waiting task lost AtMostOnce in the copy")
	}
	if ls, err := dst.Lease(t.Context(), broker.LeaseParams{SessionID: "s", Now: now, TTL: time.Hour,
		Picks: []broker.QueuePick{{Queue: "q", N: 5}}}); err != nil || len(ls) != 0 {
		t.Fatalf("a lease without start authorization on the copy: %d, %v; want none", len(ls), err)
	}
}

// copyStore copies schema from into schema to, as conveyor copy does.
func copyStore(t *testing.T, url, from, to string) {
	t.Helper()
	ctx := t.Context()
	src, err := postgres.OpenCopySource(ctx, url, from)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = src.Close() }()
	dst, err := postgres.OpenCopyTarget(ctx, url, to)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = dst.Close() }()
	queues, err := src.CopyQueues(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := dst.LoadQueues(ctx, queues); err != nil {
		t.Fatal(err)
	}
	var tasks []*broker.CopyTask
	if err := src.CopyTasks(ctx, func(ct *broker.CopyTask) error {
		tasks = append(tasks, ct)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := dst.LoadTasks(ctx, tasks); err != nil {
		t.Fatal(err)
	}
	if err := dst.Seal(ctx); err != nil {
		t.Fatal(err)
	}
	if err := dst.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}
