package server_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

// BenchmarkBoundedProducers runs 64 producers (one SDK client, their
// calls batched) enqueueing 10,000 tasks in all into one queue while a
// slower worker (concurrency 4, each task taking 1 ms of simulated work)
// drains it, with no bound and with a bound of 200 that the producers
// outrun, so that most of their calls wait for room. It
// reports the throughput, the most tasks that waited in the queue at once
// (at most the bound: the backlog the bound keeps the queue to) and the
// refusals (0: every producer got room within its wait).
func BenchmarkBoundedProducers(b *testing.B) {
	const n, producers, bound = 10_000, 64, 200
	for _, bc := range []struct {
		name  string
		bound int64
	}{{"unbounded", 0}, {"bound200", bound}} {
		b.Run(bc.name, func(b *testing.B) {
			var rate, refused, peak float64
			for range b.N { // not b.Loop: each run stops the timer for its set-up
				r, f, p := runBoundedProducers(b, n, producers, bc.bound)
				rate, refused, peak = rate+r, refused+float64(f), max(peak, float64(p))
			}
			b.ReportMetric(rate/float64(b.N), "tasks/s")
			b.ReportMetric(refused/float64(b.N), "refused/op")
			b.ReportMetric(peak, "peak_waiting")
		})
	}
}

func runBoundedProducers(b *testing.B, n, producers int, bound int64) (rate float64, refused, peak int64) {
	b.StopTimer()
	s := servertest.Start(b, server.Config{})
	if bound > 0 {
		setMaxWaiting(b, adminClient(b, s), "work", bound)
	}
	var ran atomic.Int64
	done := make(chan struct{})
	w, err := conveyor.NewWorker(s.URL(), conveyor.WithQueue("work", 1), conveyor.WithConcurrency(4))
	if err != nil {
		b.Fatal(err)
	}
	w.HandleFunc("t", func(context.Context, *conveyor.Delivery) error {
		time.Sleep(time.Millisecond) // the task's work
		if ran.Add(1) == int64(n) {
			close(done)
		}
		return nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	workerDone := make(chan error, 1)
	go func() { workerDone <- w.Run(ctx) }()
	c, err := conveyor.NewClient(s.URL())
	if err != nil {
		b.Fatal(err)
	}
	stopWatch := make(chan struct{})
	var watch sync.WaitGroup
	watch.Go(func() { peak = watchWaiting(b, s, stopWatch) })

	b.StartTimer()
	start := time.Now()
	var wg sync.WaitGroup
	var failed atomic.Int64
	for p := range producers {
		wg.Go(func() {
			for i := p; i < n; i += producers {
				if _, err := c.Enqueue(context.Background(), "t", nil, conveyor.Queue("work")); err != nil {
					if !errors.Is(err, conveyor.ErrQueueFull) {
						b.Error(err)
						return
					}
					failed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if failed.Load() == 0 {
		<-done
	}
	took := time.Since(start)
	b.StopTimer()
	close(stopWatch)
	watch.Wait()
	cancel()
	if err := <-workerDone; err != nil && !errors.Is(err, context.Canceled) {
		b.Fatalf("worker: %v", err)
	}
	b.StartTimer()
	return float64(n) / took.Seconds(), failed.Load(), peak
}

// watchWaiting samples the tasks waiting in queue "work" until stop, and
// returns the most it saw.
func watchWaiting(b *testing.B, s *servertest.Server, stop <-chan struct{}) int64 {
	var peak int64
	for {
		select {
		case <-stop:
			return peak
		case <-time.After(5 * time.Millisecond):
		}
		q := queueCounts(b, s, "work")
		peak = max(peak, q.GetPending()+q.GetScheduled()+q.GetRetry()+q.GetAggregating()+q.GetBlocked())
	}
}
