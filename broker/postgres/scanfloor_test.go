package postgres_test

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/conveyor-dev/conveyor/broker"
	bt "github.com/conveyor-dev/conveyor/broker/brokertest"
	"github.com/conveyor-dev/conveyor/broker/postgres"
	"github.com/conveyor-dev/conveyor/internal/pgtest"
)

// TestTaskBelowScanFloorIsLeased: a lease walks a queue's ready line from
// its scan floors, which rise past the tasks leased. A task that a
// transaction made ready with a ready_seq drawn before the floor rose (it
// committed after) lies below it: here one is made so by lowering its
// ready_seq. A lease of one task, with a task above the floor, takes that
// one (the walk went by the floor); the lease that then finds nothing
// above the floor while the queue's count says a task is ready walks again
// from the start and takes the one below: it is never stranded. Each kind
// of walk goes by floors of its own: the open line's, the line without
// at-most-once tasks, and a typed walk's kinds (route.go).
func TestTaskBelowScanFloorIsLeased(t *testing.T) {
	t.Parallel()
	for name, route := range map[string]broker.Route{
		"open":                {StartAuthorization: true},
		"plain":               {},
		"typed":               {Types: []string{"test", "other"}},
		"typed, at most once": {Types: []string{"test"}, StartAuthorization: true},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			leaseBelowFloor(t, route)
		})
	}
}

func leaseBelowFloor(t *testing.T, route broker.Route) {
	schema := pgtest.Schema(t, t.Name())
	e, err := postgres.Open(t.Context(), postgres.Config{URL: pgtest.URL(t), Schema: schema, MaxConns: 4})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = e.Close() })
	enqueue := func() string {
		now := time.Now()
		tasks, err := e.Enqueue(t.Context(), broker.EnqueueParams{Now: now, Tasks: bt.WithStates([]broker.NewTask{bt.NewTask("q")}, now)})
		if err != nil {
			t.Fatal(err)
		}
		return tasks[0].Task.ID
	}
	lease := func(n int) []string {
		ls, err := e.Lease(t.Context(), broker.LeaseParams{SessionID: "s", Now: time.Now(), TTL: time.Minute,
			Picks: []broker.QueuePick{{Queue: "q", N: n}}, Route: route})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, l := range ls {
			ids = append(ids, l.Task.ID)
		}
		return ids
	}
	// Two tasks leased: the floor rises above both.
	enqueue()
	enqueue()
	if ids := lease(10); len(ids) != 2 {
		t.Fatalf("leased %v, want the 2 tasks", ids)
	}
	late := enqueue()
	conn, err := pgx.Connect(t.Context(), pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(t.Context()) })
	if _, err := conn.Exec(t.Context(), "UPDATE "+pgx.Identifier{schema, "conveyor_tasks"}.Sanitize()+" SET ready_seq = 1 WHERE id = $1", late); err != nil {
		t.Fatal(err)
	}
	above := enqueue()
	if ids := lease(1); len(ids) != 1 || ids[0] != above {
		t.Fatalf("leased %v, want the task above the floor, %s (the walk went by the floor)", ids, above)
	}
	if ids := lease(10); len(ids) != 1 || ids[0] != late {
		t.Fatalf("leased %v, want the task below the floor, %s", ids, late)
	}
}
