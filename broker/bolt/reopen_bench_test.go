package bolt_test

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/conveyor-dev/conveyor/broker"
	"github.com/conveyor-dev/conveyor/broker/bolt"
	bt "github.com/conveyor-dev/conveyor/broker/brokertest"
)

// BenchmarkReopen measures opening a file that holds pending tasks, ready
// to dispatch: the rebuild of every in-memory index. CONVEYOR_BENCH_TASKS
// sets how many (default 200,000).
func BenchmarkReopen(b *testing.B) {
	n := 200_000
	if s := os.Getenv("CONVEYOR_BENCH_TASKS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil {
			b.Fatalf("CONVEYOR_BENCH_TASKS: %v", err)
		}
	}
	path := filepath.Join(b.TempDir(), "conveyor.db")
	e, err := bolt.Open(bolt.Config{Path: path})
	if err != nil {
		b.Fatal(err)
	}
	batch := make([]broker.NewTask, 1000)
	for left := n; left > 0; left -= len(batch) {
		for i := range batch {
			batch[i] = bt.NewTask("q")
		}
		bt.Enqueue(b, e, bt.T0, batch[:min(left, len(batch))]...)
	}
	if err := e.Close(); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		e, err := bolt.Open(bolt.Config{Path: path})
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if got := bt.Ready(e, "q"); got != n {
			b.Fatalf("%d tasks ready after the reopen, want %d", got, n)
		}
		if err := e.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "tasks/s")
}
