package postgres_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
	bt "github.com/conveyor-dev/conveyor/broker/brokertest"
	"github.com/conveyor-dev/conveyor/broker/postgres"
)

// BenchmarkLeaseBatch measures a session's lease of 32 tasks, W3's
// shape: a worker routed to the one type of the queue's tasks (at most
// once or not), from a line of as many tasks as the run leases. The tasks
// leased are completed off the clock.
func BenchmarkLeaseBatch(b *testing.B) {
	const batch = 32
	e := openEngine(b, fmt.Sprint(b.Name(), time.Now().UnixNano()), postgres.Config{MaxConns: 4})
	ctx := b.Context()
	now := time.Now()
	for left := b.N * batch; left > 0; left -= 1000 {
		tasks := make([]broker.NewTask, min(left, 1000))
		for i := range tasks {
			tasks[i] = bt.NewTask("q")
			tasks[i].Type = "t"
		}
		if _, err := e.Enqueue(ctx, broker.EnqueueParams{Now: now, Tasks: bt.WithStates(tasks, now)}); err != nil {
			b.Fatal(err)
		}
	}
	route := broker.Route{Types: []string{"t"}, StartAuthorization: true}
	b.ResetTimer()
	for i := range b.N {
		ls, err := e.Lease(ctx, broker.LeaseParams{SessionID: "s", Picks: []broker.QueuePick{{Queue: "q", N: batch}},
			Now: now.Add(time.Duration(i) * time.Microsecond), TTL: time.Hour, Route: route})
		if err != nil || len(ls) != batch {
			b.Fatalf("lease %d: %d tasks, %v", i, len(ls), err)
		}
		b.StopTimer()
		held := make([]broker.Decision, len(ls))
		for j, l := range ls {
			held[j] = broker.Decision{SessionID: "s", Kind: broker.DecideComplete, Now: now,
				Lease: broker.LeaseRef{TaskID: l.Task.ID, Token: l.Token}}
		}
		if _, err := e.CompleteBatch(ctx, held); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}
