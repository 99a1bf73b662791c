package bolt_test

import (
	"sync"
	"testing"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
	"github.com/conveyor-dev/conveyor/broker/bolt"
	bt "github.com/conveyor-dev/conveyor/broker/brokertest"
)

func TestGroupCommitMerges(t *testing.T) {
	e := openEngine(t, bolt.Config{})
	const n = 200
	ids := make([]string, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			res, err := e.Enqueue(t.Context(), broker.EnqueueParams{Tasks: bt.WithStates([]broker.NewTask{bt.NewTask("q")}, bt.T0), Now: bt.T0})
			switch {
			case err != nil:
				errs[i] = err
			case res[0].Err != nil:
				errs[i] = res[0].Err
			default:
				ids[i] = res[0].Task.ID
			}
		})
	}
	close(start)
	wg.Wait()

	seen := map[string]bool{}
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("Enqueue %d: %v", i, errs[i])
		}
		if seen[ids[i]] {
			t.Fatalf("id %s assigned twice", ids[i])
		}
		seen[ids[i]] = true
	}
	txs, ops := e.CommitStats()
	t.Logf("%d concurrent enqueues committed in %d transactions", n, txs)
	if ops != n {
		t.Fatalf("CommitStats ops = %d, want %d (one per Enqueue)", ops, n)
	}
	// The committer fsyncs each transaction; enqueues arriving meanwhile
	// share the next one.
	if txs < 1 || txs >= n/2 {
		t.Fatalf("%d enqueues took %d transactions, want fewer than %d", n, txs, n/2)
	}
	if got := bt.Ready(e, "q"); got != n {
		t.Fatalf("Ready = %d, want %d", got, n)
	}
}

func TestSyncMakesLeasesDurable(t *testing.T) {
	e := openEngine(t, bolt.Config{})
	bt.EnqueueOne(t, e, bt.T0, bt.NewTask("q"))
	_, opsBefore := e.CommitStats()
	bt.LeaseOne(t, e, "s1", "q", bt.T0)
	if err := e.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, ops := e.CommitStats(); ops != opsBefore+1 {
		t.Fatalf("after Lease and Sync, %d ops committed, want %d", ops, opsBefore+1)
	}
	// Nothing pending: Sync returns at once.
	if err := e.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
}

func BenchmarkEnqueueBatch1000(b *testing.B) {
	e := openEngine(b, bolt.Config{})
	batch := make([]broker.NewTask, 1000)
	for i := range batch {
		batch[i] = bt.NewTask("q")
	}
	b.ReportAllocs()
	for b.Loop() {
		bt.Enqueue(b, e, bt.T0, batch...)
	}
	b.ReportMetric(float64(b.N*len(batch))/b.Elapsed().Seconds(), "tasks/s")
}

// BenchmarkEnqueueParallel measures 32 concurrent single-task enqueues,
// with the committer's linger on (the default) and off; ops/commit shows
// how much group commit merged.
func BenchmarkEnqueueParallel(b *testing.B) {
	for _, bc := range []struct {
		name   string
		linger time.Duration
	}{{"linger", 0}, {"nolinger", -1}} {
		b.Run(bc.name, func(b *testing.B) {
			e := openEngine(b, bolt.Config{MaxCommitLinger: bc.linger})
			b.ReportAllocs()
			b.SetParallelism(16) // 32 goroutines on 2 cores
			b.RunParallel(func(pb *testing.PB) {
				nt := bt.WithStates([]broker.NewTask{bt.NewTask("q")}, bt.T0)
				for pb.Next() {
					if _, err := e.Enqueue(b.Context(), broker.EnqueueParams{Tasks: nt, Now: bt.T0}); err != nil {
						b.Error(err)
						return
					}
				}
			})
			txs, ops := e.CommitStats()
			b.ReportMetric(float64(ops)/float64(max(txs, 1)), "ops/commit")
		})
	}
}

func BenchmarkLeaseComplete(b *testing.B) {
	e := openEngine(b, bolt.Config{})
	batch := make([]broker.NewTask, 1000)
	for i := range batch {
		batch[i] = bt.NewTask("q")
	}
	for left := b.N; left > 0; left -= len(batch) {
		bt.Enqueue(b, e, bt.T0, batch[:min(left, len(batch))]...)
	}
	b.ReportAllocs()
	b.ResetTimer()
	now := bt.T0.Add(time.Second)
	for range b.N {
		ls, err := e.Lease(b.Context(), broker.LeaseParams{SessionID: "s1", Picks: []broker.QueuePick{{Queue: "q", N: 1}}, Now: now, TTL: bt.TTL})
		if err != nil || len(ls) != 1 {
			b.Fatalf("Lease = %d leases, %v", len(ls), err)
		}
		if _, err := e.Complete(b.Context(), decide("s1", ls[0], outcomeSuccess, now)); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if err := e.Sync(b.Context()); err != nil {
		b.Fatal(err)
	}
}
