package server_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

// BenchmarkBulkArchiveDuringDrain archives 100,000 pending tasks of one
// queue with BulkTasks while a worker (concurrency 64) drains another,
// W3-style, and reports the longest gap between two consecutive task
// starts of the drain while the bulk action ran, next to the same drain's
// longest gap with no bulk action: a bulk action that held dispatch up
// shows as a longer gap. bulk_s is how long the archive took.
func BenchmarkBulkArchiveDuringDrain(b *testing.B) {
	const n = 100_000
	for _, withBulk := range []bool{false, true} {
		name := "drain"
		if withBulk {
			name = "drain+bulk"
		}
		b.Run(name, func(b *testing.B) {
			var gaps, bulkSecs []float64
			for range b.N { // not b.Loop: each run stops the timer for its set-up
				gap, bulk := drainWithBulk(b, n, withBulk)
				gaps, bulkSecs = append(gaps, gap.Seconds()*1000), append(bulkSecs, bulk.Seconds())
			}
			b.ReportMetric(slices.Max(gaps), "max_gap_ms")
			if withBulk {
				b.ReportMetric(slices.Max(bulkSecs), "bulk_s")
			}
		})
	}
}

// drainWithBulk runs one drain of n tasks, with a bulk archive of n other
// tasks started with it when withBulk, and returns the longest gap between
// task starts while the archive ran (or over the same span of the drain
// without it) and how long the archive took.
func drainWithBulk(b *testing.B, n int, withBulk bool) (maxGap, bulkTook time.Duration) {
	b.StopTimer()
	s := servertest.Start(b, server.Config{})
	tasks := taskClient(b, s, servertest.GRPC)
	enqueueQueue(b, tasks, "work", n)
	if withBulk {
		enqueueQueue(b, tasks, "bulk", n)
	}
	var mu sync.Mutex
	starts := make([]time.Time, 0, n)
	done := make(chan struct{})
	w, err := conveyor.NewWorker(s.URL(), conveyor.WithQueue("work", 1), conveyor.WithConcurrency(64))
	if err != nil {
		b.Fatal(err)
	}
	w.HandleFunc("t", func(context.Context, *conveyor.Delivery) error {
		mu.Lock()
		starts = append(starts, time.Now())
		if len(starts) == n {
			close(done)
		}
		mu.Unlock()
		return nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ran := make(chan error, 1)
	b.StartTimer()
	go func() { ran <- w.Run(ctx) }()
	from := time.Now()
	to := from.Add(2 * time.Second) // without a bulk action: the drain's first two seconds
	if withBulk {
		stream, err := adminClient(b, s).BulkTasks(context.Background(), connect.NewRequest(&conveyorv1.BulkTasksRequest{
			Action: conveyorv1.TaskAction_TASK_ACTION_ARCHIVE, Queue: "bulk", State: conveyorv1.TaskState_TASK_STATE_PENDING}))
		if err != nil {
			b.Fatal(err)
		}
		for stream.Receive() {
		}
		if err := stream.Err(); err != nil {
			b.Fatal(err)
		}
		to = time.Now()
		bulkTook = to.Sub(from)
	}
	<-done
	b.StopTimer()
	cancel()
	if err := <-ran; err != nil && !errors.Is(err, context.Canceled) {
		b.Fatalf("worker: %v", err)
	}
	defer b.StartTimer()
	mu.Lock()
	defer mu.Unlock()
	for i := 1; i < len(starts); i++ {
		if starts[i].After(from) && starts[i-1].Before(to) {
			maxGap = max(maxGap, starts[i].Sub(starts[i-1]))
		}
	}
	if withBulk {
		if q := queueCounts(b, s, "bulk"); q.GetArchived() != int64(n) {
			b.Fatalf("bulk archived %d of %d", q.GetArchived(), n)
		}
	}
	return maxGap, bulkTook
}

func enqueueQueue(b *testing.B, tasks interface {
	EnqueueBatch(context.Context, *connect.Request[conveyorv1.EnqueueBatchRequest]) (*connect.Response[conveyorv1.EnqueueBatchResponse], error)
}, queue string, n int) {
	b.Helper()
	items := make([]*conveyorv1.EnqueueRequest, 1000)
	for i := range items {
		items[i] = &conveyorv1.EnqueueRequest{Queue: queue, Type: "t", Payload: []byte(`{"pad":"0123456789012345678901234567890123456789"}`)}
	}
	for done := 0; done < n; done += len(items) {
		if _, err := tasks.EnqueueBatch(context.Background(), connect.NewRequest(&conveyorv1.EnqueueBatchRequest{Items: items, Brief: true})); err != nil {
			b.Fatal(err)
		}
	}
}
