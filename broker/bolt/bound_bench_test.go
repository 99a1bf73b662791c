package bolt_test

import (
	"testing"

	"github.com/conveyor-dev/conveyor/broker"
	"github.com/conveyor-dev/conveyor/broker/bolt"
	bt "github.com/conveyor-dev/conveyor/broker/brokertest"
)

// BenchmarkEnqueueBounded measures what a queue's bound costs an enqueue:
// batches of 1000 into a queue with no bound and into one whose bound is
// never reached (the check per task), a single enqueue into a queue kept
// one task below its bound by a lease before each (the check, the room
// signal and the commit), and a refusal by a full queue (no commit).
func BenchmarkEnqueueBounded(b *testing.B) {
	batch := bt.WithStates(make1000("q"), bt.T0)
	for _, bc := range []struct {
		name  string
		bound int64
	}{{"unbounded", 0}, {"bounded", 1_000_000_000}} {
		b.Run(bc.name+"/batch1000", func(b *testing.B) {
			e := openEngine(b, bolt.Config{})
			setBound(b, e, "q", bc.bound)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := e.Enqueue(b.Context(), broker.EnqueueParams{Tasks: batch, Now: bt.T0}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*len(batch))/b.Elapsed().Seconds(), "tasks/s")
		})
	}
	one := bt.WithStates([]broker.NewTask{bt.NewTask("q")}, bt.T0)
	b.Run("atBound", func(b *testing.B) {
		e := openEngine(b, bolt.Config{})
		setBound(b, e, "q", 100)
		bt.Enqueue(b, e, bt.T0, make1000("q")[:100]...)
		b.ReportAllocs()
		for b.Loop() {
			bt.LeaseOne(b, e, "s1", "q", bt.T0)
			res, err := e.Enqueue(b.Context(), broker.EnqueueParams{Tasks: one, Now: bt.T0})
			if err != nil || res[0].Err != nil {
				b.Fatalf("Enqueue below the bound: %v, %v", err, res[0].Err)
			}
		}
	})
	b.Run("refused", func(b *testing.B) {
		e := openEngine(b, bolt.Config{})
		setBound(b, e, "q", 100)
		bt.Enqueue(b, e, bt.T0, make1000("q")[:100]...)
		b.ReportAllocs()
		for b.Loop() {
			res, err := e.Enqueue(b.Context(), broker.EnqueueParams{Tasks: one, Now: bt.T0})
			if err != nil || res[0].Err == nil {
				b.Fatalf("Enqueue into a full queue: %v, %v", err, res[0].Err)
			}
		}
	})
}

func make1000(queue string) []broker.NewTask {
	out := make([]broker.NewTask, 1000)
	for i := range out {
		out[i] = bt.NewTask(queue)
	}
	return out
}

func setBound(b *testing.B, e *bolt.Engine, queue string, n int64) {
	b.Helper()
	if _, err := e.UpdateQueueConfig(b.Context(), queue, func(c *broker.QueueConfig) { c.MaxWaiting = n }); err != nil {
		b.Fatal(err)
	}
}
