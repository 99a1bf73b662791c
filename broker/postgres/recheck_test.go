package postgres_test

import (
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/conveyor-dev/conveyor/broker"
	bt "github.com/conveyor-dev/conveyor/broker/brokertest"
	"github.com/conveyor-dev/conveyor/broker/postgres"
	"github.com/conveyor-dev/conveyor/internal/pgtest"
	"github.com/conveyor-dev/conveyor/internal/testwait"
)

// readySignals records the queues TasksReady named.
type readySignals struct {
	broker.NopNotifier
	mu sync.Mutex
	n  map[string]int
}

func (r *readySignals) TasksReady(queue string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n[queue]++
}

func (r *readySignals) count(queue string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n[queue]
}

// TestShortLeaseSignalsAgain: a Lease that takes fewer tasks than the
// queue's count promised (here the one ready row is locked by another
// transaction, which SKIP LOCKED passes) leaves the session that asked
// idle, and the count never returns to 0 for a later commit to signal. So
// the engine looks again a moment later and signals TasksReady while the
// task is still there: no ready task is slept through.
func TestShortLeaseSignalsAgain(t *testing.T) {
	t.Parallel()
	schema := pgtest.Schema(t, t.Name())
	note := &readySignals{n: map[string]int{}}
	e, err := postgres.Open(t.Context(), postgres.Config{URL: pgtest.URL(t), Schema: schema, Notifier: note, MaxConns: 4})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = e.Close() })
	now := time.Now()
	if _, err := e.Enqueue(t.Context(), broker.EnqueueParams{Now: now, Tasks: bt.WithStates([]broker.NewTask{bt.NewTask("q")}, now)}); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(t.Context(), pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(t.Context()) })
	tx, err := conn.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(t.Context(), "SELECT id FROM "+pgx.Identifier{schema, "conveyor_tasks"}.Sanitize()+" FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	lease := func() int {
		ls, err := e.Lease(t.Context(), broker.LeaseParams{SessionID: "s", Now: time.Now(), TTL: time.Minute,
			Picks: []broker.QueuePick{{Queue: "q", N: 1}}})
		if err != nil {
			t.Fatal(err)
		}
		return len(ls)
	}
	if n := lease(); n != 0 {
		t.Fatalf("leased %d tasks past another transaction's lock, want 0", n)
	}
	before := note.count("q")
	if err := tx.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, 10*time.Second, "TasksReady for the queue after the short lease", func() bool { return note.count("q") > before })
	if n := lease(); n != 1 {
		t.Fatalf("leased %d tasks once the lock was gone, want 1", n)
	}
}
