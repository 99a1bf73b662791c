package bolt_test

import (
	"testing"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
	"github.com/conveyor-dev/conveyor/broker/bolt"
	bt "github.com/conveyor-dev/conveyor/broker/brokertest"
)

// BenchmarkUnblockDependents measures one task's completion releasing its
// 10,000 BLOCKED dependents: the time from Complete to durable, and the
// commits it took (the figure: one).
func BenchmarkUnblockDependents(b *testing.B) {
	const dependents = 10_000
	e := openEngine(b, bolt.Config{})
	var commits int64
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		parent := bt.EnqueueOne(b, e, bt.T0, bt.NewTask("parents"))
		batch := make([]broker.NewTask, 0, 1000)
		for n := 0; n < dependents; n += len(batch) {
			batch = batch[:0]
			for range 1000 {
				nt := bt.NewTask("children")
				nt.DependsOn = []broker.Dependency{{TaskID: parent.ID}}
				batch = append(batch, nt)
			}
			bt.Enqueue(b, e, bt.T0, bt.WithStates(batch, bt.T0)...)
		}
		l := bt.LeaseOne(b, e, "s", "parents", bt.T0)
		if err := e.Sync(b.Context()); err != nil {
			b.Fatal(err)
		}
		before, _ := e.CommitStats()
		b.StartTimer()
		if _, err := e.Complete(b.Context(), decide("s", l, outcomeSuccess, bt.T0.Add(time.Second))); err != nil {
			b.Fatal(err)
		}
		if err := e.Sync(b.Context()); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		after, _ := e.CommitStats()
		commits += after - before
		if ready := bt.Ready(e, "children"); ready != (i+1)*dependents {
			b.Fatalf("%d children ready after %d parents completed, want %d", ready, i+1, (i+1)*dependents)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(commits)/float64(b.N), "commits/op")
	b.ReportMetric(dependents*float64(b.N)/b.Elapsed().Seconds(), "released/s")
}

// BenchmarkCascadeChain measures CancelTask on the root of a chain of
// CONVEYOR_BENCH_TASKS (default 10,000) CASCADE_CANCEL links, ids rising
// along the chain as a producer enqueueing each link after the one before
// gets them: from the call to the whole chain durable, in one commit.
func BenchmarkCascadeChain(b *testing.B) {
	n := bolt.BenchTasks(b, 10_000)
	e := openEngine(b, bolt.Config{})
	for b.Loop() {
		b.StopTimer()
		root := bt.EnqueueOne(b, e, bt.T0, bt.NewTask("root"))
		prev := root.ID
		for start := 0; start < n; start += 1000 {
			items := make([]broker.NewTask, min(1000, n-start))
			for i := range items {
				nt := bt.NewTask("chain")
				nt.ID = bt.NewID()
				nt.DependsOn = []broker.Dependency{{TaskID: prev, OnFailure: broker.OnFailureCascadeCancel}}
				items[i], prev = nt, nt.ID
			}
			if _, err := e.EnqueueTx(b.Context(), broker.EnqueueParams{Now: bt.T0, Tasks: bt.WithStates(items, bt.T0)}); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		res, err := e.Act(b.Context(), broker.ActParams{Action: broker.ActionCancel, IDs: []string{root.ID}, Now: bt.T0})
		if err != nil || res[0].Err != nil {
			b.Fatalf("cancel: %v %v", err, res)
		}
		if err := e.Sync(b.Context()); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "links/s")
}
