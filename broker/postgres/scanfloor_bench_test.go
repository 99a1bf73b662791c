package postgres_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/conveyor-dev/conveyor/broker"
	bt "github.com/conveyor-dev/conveyor/broker/brokertest"
	"github.com/conveyor-dev/conveyor/broker/postgres"
	"github.com/conveyor-dev/conveyor/internal/pgtest"
)

// BenchmarkLeaseUnderHeldSnapshot measures the lease of one task (each
// enqueued and completed off the clock) while another session holds a snapshot
// open, as a long report or pg_dump does: VACUUM can then remove none of
// the ready index's entries of the tasks leased since, and a lease that
// walked the ready line from its start would visit each one. The cost of
// an operation grows with b.N unless the lease skips them (scanfloor.go):
// run it with a fixed count, e.g. -benchtime 20000x.
func BenchmarkLeaseUnderHeldSnapshot(b *testing.B) {
	e := openEngine(b, fmt.Sprint(b.Name(), time.Now().UnixNano()), postgres.Config{MaxConns: 4})
	ctx := b.Context()
	conn, err := pgx.Connect(ctx, pgtest.URL(b))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = conn.Close(ctx) })
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "SELECT 1"); err != nil { // takes the snapshot
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = tx.Rollback(ctx) })
	now := time.Now()
	b.ResetTimer()
	for i := range b.N {
		at := now.Add(time.Duration(i) * time.Microsecond)
		b.StopTimer()
		if _, err := e.Enqueue(ctx, broker.EnqueueParams{Now: at, Tasks: bt.WithStates([]broker.NewTask{bt.NewTask("q")}, at)}); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		ls, err := e.Lease(ctx, broker.LeaseParams{SessionID: "s", Picks: []broker.QueuePick{{Queue: "q", N: 8}}, Now: at, TTL: time.Hour})
		if err != nil || len(ls) != 1 {
			b.Fatalf("lease %d: %d tasks, %v", i, len(ls), err)
		}
		b.StopTimer()
		if _, err := e.Complete(ctx, broker.Decision{SessionID: "s", Kind: broker.DecideComplete, Now: at,
			Lease: broker.LeaseRef{TaskID: ls[0].Task.ID, Token: ls[0].Token}}); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}
