package postgres_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
	bt "github.com/conveyor-dev/conveyor/broker/brokertest"
	"github.com/conveyor-dev/conveyor/broker/postgres"
)

// BenchmarkLeaseRouted measures a lease of one task by each kind of route
// (route.go), from a queue whose ready line interleaves four types, t0 to
// t3, and at-most-once tasks of type t0, as many of each as the run
// leases: an open lease (the walk every lease made before routing), the
// zero route's (which passes the at-most-once tasks over), and leases
// routed to one and to two of the types (one branch each). The tasks
// leased are completed off the clock.
func BenchmarkLeaseRouted(b *testing.B) {
	for _, c := range []struct {
		name  string
		route broker.Route
	}{
		{"open", broker.Route{StartAuthorization: true}},
		{"zero", broker.Route{}},
		{"types=t3", broker.Route{Types: []string{"t3"}, StartAuthorization: true}},
		{"types=t1,t3", broker.Route{Types: []string{"t1", "t3"}, StartAuthorization: true}},
	} {
		b.Run(c.name, func(b *testing.B) {
			e := openEngine(b, fmt.Sprint(b.Name(), time.Now().UnixNano()), postgres.Config{MaxConns: 4})
			ctx := b.Context()
			now := time.Now()
			for left := b.N; left > 0; left -= 200 {
				var tasks []broker.NewTask
				for range min(left, 200) {
					for k := range 5 {
						nt := bt.NewTask("q")
						nt.Type = fmt.Sprint("t", k%4)
						nt.AtMostOnce = k == 4
						tasks = append(tasks, nt)
					}
				}
				if _, err := e.Enqueue(ctx, broker.EnqueueParams{Now: now, Tasks: bt.WithStates(tasks, now)}); err != nil {
					b.Fatal(err)
				}
			}
			var held []broker.Decision
			b.ResetTimer()
			for i := range b.N {
				ls, err := e.Lease(ctx, broker.LeaseParams{SessionID: "s", Picks: []broker.QueuePick{{Queue: "q", N: 1}},
					Now: now.Add(time.Duration(i) * time.Microsecond), TTL: time.Hour,
					Route: c.route})
				if err != nil || len(ls) != 1 {
					b.Fatalf("lease %d: %d tasks, %v", i, len(ls), err)
				}
				held = append(held, broker.Decision{SessionID: "s", Kind: broker.DecideComplete, Now: now,
					Lease: broker.LeaseRef{TaskID: ls[0].Task.ID, Token: ls[0].Token}})
				if len(held) == 500 {
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
