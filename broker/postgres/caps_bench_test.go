package postgres_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
	bt "github.com/conveyor-dev/conveyor/broker/brokertest"
	"github.com/conveyor-dev/conveyor/broker/postgres"
)

// BenchmarkLeaseCapped measures a lease of one task from a queue without
// caps, with a cap of 1000 ACTIVE tasks, and with that cap and a rate
// limit too high to wait for: what deciding the caps in the database costs
// a lease. Between 0 and 900 of the queue's tasks are ACTIVE throughout
// (the benchmark completes them, off the clock, as they pile up), so the
// count under the cap reads hundreds of rows.
func BenchmarkLeaseCapped(b *testing.B) {
	for _, c := range []struct {
		name string
		cfg  broker.QueueConfig
	}{
		{"uncapped", broker.QueueConfig{}},
		{"max_active=1000", broker.QueueConfig{MaxActive: 1000}},
		{"max_active=1000,rate", broker.QueueConfig{MaxActive: 1000, RatePerSecond: 1 << 30}},
	} {
		b.Run(c.name, func(b *testing.B) {
			// A schema of its own for each run (b.N grows from 1).
			e := openEngine(b, fmt.Sprint(b.Name(), time.Now().UnixNano()), postgres.Config{MaxConns: 4})
			ctx := b.Context()
			if _, err := e.UpdateQueueConfig(ctx, "q", func(cfg *broker.QueueConfig) { *cfg = c.cfg }); err != nil {
				b.Fatal(err)
			}
			now := time.Now()
			for left := b.N; left > 0; left -= 1000 {
				tasks := make([]broker.NewTask, min(left, 1000))
				for i := range tasks {
					tasks[i] = bt.NewTask("q")
				}
				if _, err := e.Enqueue(ctx, broker.EnqueueParams{Now: now, Tasks: bt.WithStates(tasks, now)}); err != nil {
					b.Fatal(err)
				}
			}
			var held []broker.Decision
			b.ResetTimer()
			for i := range b.N {
				ls, err := e.Lease(ctx, broker.LeaseParams{SessionID: "s", Picks: []broker.QueuePick{{Queue: "q", N: 1}},
					Now: now.Add(time.Duration(i) * time.Microsecond), TTL: time.Hour})
				if err != nil || len(ls) != 1 {
					b.Fatalf("lease %d: %d tasks, %v", i, len(ls), err)
				}
				held = append(held, broker.Decision{SessionID: "s", Kind: broker.DecideComplete, Now: now,
					Lease: broker.LeaseRef{TaskID: ls[0].Task.ID, Token: ls[0].Token}})
				if len(held) == 900 {
					b.StopTimer()
					if _, err := e.CompleteBatch(ctx, held); err != nil {
						b.Fatal(err)
					}
					held = held[:0]
					b.StartTimer()
				}
			}
		})
	}
}
