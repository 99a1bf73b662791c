package conveyor_test

import (
	"context"
	"fmt"
	"net/http"
	"runtime"
	"testing"

	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

// BenchmarkEnqueueParallel enqueues from 32 goroutines (and from 2, for
// the light load) sharing one Client, a fresh server for each mode:
// batching off (an RPC per call) and on with 1, 2 and 4 RPCs in flight.
// rpcs/op is how many RPCs each call cost.
//
//	go test -run '^$' -bench BenchmarkEnqueueParallel -benchtime 3s -count 5 ./sdks/go
func BenchmarkEnqueueParallel(b *testing.B) {
	for _, g := range []int{32, 2} {
		b.Run(fmt.Sprintf("g=%d", g), func(b *testing.B) { benchmarkEnqueueParallel(b, g) })
	}
}

func benchmarkEnqueueParallel(b *testing.B, goroutines int) {
	for _, bc := range []struct {
		name string
		opts []conveyor.Option
	}{
		{"batching=off", []conveyor.Option{conveyor.WithEnqueueBatching(false)}},
		{"inflight=1", []conveyor.Option{conveyor.WithEnqueueInFlight(1)}},
		{"inflight=2", []conveyor.Option{conveyor.WithEnqueueInFlight(2)}},
		{"inflight=4", []conveyor.Option{conveyor.WithEnqueueInFlight(4)}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s := servertest.Start(b, server.Config{})
			gate := newRPCGate()
			c, err := conveyor.NewClient(s.URL(), append([]conveyor.Option{conveyor.WithHTTPClient(&http.Client{Transport: gate})}, bc.opts...)...)
			if err != nil {
				b.Fatal(err)
			}
			payload := []byte(`{"to":"ada@example.com","subject":"hello","body":"a short message"}`)
			ctx := context.Background()
			b.SetParallelism(max(1, goroutines/runtime.GOMAXPROCS(0)))
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := c.Enqueue(ctx, "email", payload); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(float64(gate.count("Enqueue")+gate.count("EnqueueBatch"))/float64(b.N), "rpcs/op")
		})
	}
}
