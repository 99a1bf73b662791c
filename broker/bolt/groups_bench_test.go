package bolt_test

import (
	"fmt"
	"testing"

	"github.com/conveyor-dev/conveyor/broker"
	"github.com/conveyor-dev/conveyor/broker/bolt"
	bt "github.com/conveyor-dev/conveyor/broker/brokertest"
)

// BenchmarkFiredGroupBacklog measures what a session's send round costs
// with a backlog of fired groups waiting in its queue: ReadyGroups, then
// LeaseGroups for one batch, while a producer keeps the backlog at its
// size (one group of one member fires per op). A backlog builds up when
// workers of a batch type fall behind, and every round of every session
// of the queue pays this under the engine's lock, so it must not grow with
// the backlog. "other" is the same with the backlog of a type the session
// does not take, one group of its own type behind it.
func BenchmarkFiredGroupBacklog(b *testing.B) {
	for _, backlog := range []int{1_000, 100_000} {
		for _, kind := range []string{"same", "other"} {
			b.Run(fmt.Sprintf("%s/%d", kind, backlog), func(b *testing.B) { benchFiredGroups(b, kind, backlog) })
		}
	}
}

func benchFiredGroups(b *testing.B, kind string, backlog int) {
	e := openEngine(b, bolt.Config{})
	if _, err := e.UpdateQueueConfig(b.Context(), "q", func(c *broker.QueueConfig) { c.Group.MaxSize = 1 }); err != nil {
		b.Fatal(err)
	}
	backlogType := "t"
	if kind == "other" {
		backlogType = "u"
	}
	group := func(i int, typ string) broker.NewTask {
		nt := bt.NewTask("q")
		nt.Group, nt.Type = fmt.Sprintf("g%d", i), typ
		return nt
	}
	batch := make([]broker.NewTask, 0, 1000)
	for i := 0; i < backlog; i += len(batch) {
		batch = batch[:0]
		for j := 0; j < 1000 && i+j < backlog; j++ {
			batch = append(batch, group(i+j, backlogType))
		}
		bt.Enqueue(b, e, bt.T0, batch...)
	}
	counts := make([]int, 1)
	queues, types := []string{"q"}, []string{"t"}
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		bt.EnqueueOne(b, e, bt.T0, group(backlog+i, "t"))
		b.StartTimer()
		e.ReadyGroups(queues, types, counts)
		if counts[0] < 1 {
			b.Fatalf("ReadyGroups = %d, want at least 1", counts[0])
		}
		gl, err := e.LeaseGroups(b.Context(), broker.GroupLeaseParams{SessionID: "s", Queue: "q", Types: types, N: 1, Now: bt.T0, TTL: bt.TTL})
		if err != nil || len(gl) != 1 {
			b.Fatalf("LeaseGroups = %d batches, %v; want one", len(gl), err)
		}
	}
}

// BenchmarkCappedGroupBacklog measures a task of a queue with a cap on
// ACTIVE tasks finishing while fired groups wait that do not fit in the
// room it leaves: whether one fits now is asked on every task that leaves
// ACTIVE, so it must not walk the backlog.
func BenchmarkCappedGroupBacklog(b *testing.B) {
	for _, backlog := range []int{1_000, 100_000} {
		b.Run(fmt.Sprint(backlog), func(b *testing.B) {
			e := openEngine(b, bolt.Config{})
			if _, err := e.UpdateQueueConfig(b.Context(), "q", func(c *broker.QueueConfig) {
				c.Group.MaxSize, c.MaxActive = 2, 2
			}); err != nil {
				b.Fatal(err)
			}
			batch := make([]broker.NewTask, 0, 1000)
			for i := 0; i < backlog; i += len(batch) {
				batch = batch[:0]
				for j := 0; j < 500 && i+j < backlog; j++ {
					for range 2 {
						nt := bt.NewTask("q")
						nt.Group, nt.Type = fmt.Sprintf("g%d", i+j), "t"
						batch = append(batch, nt)
					}
				}
				bt.Enqueue(b, e, bt.T0, batch...)
			}
			// A single task runs throughout and another finishes in each
			// op, leaving room for one: no group of two fits.
			bt.EnqueueOne(b, e, bt.T0, bt.NewTask("q"))
			keep := bt.LeaseOne(b, e, "s", "q", bt.T0)
			for b.Loop() {
				b.StopTimer()
				bt.EnqueueOne(b, e, bt.T0, bt.NewTask("q"))
				l := bt.LeaseOne(b, e, "s", "q", bt.T0)
				b.StartTimer()
				bt.Succeed(b, e, "s", l, bt.T0)
			}
			bt.Succeed(b, e, "s", keep, bt.T0)
		})
	}
}
