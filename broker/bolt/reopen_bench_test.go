package bolt_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/conveyor-dev/conveyor/broker"
	"github.com/conveyor-dev/conveyor/broker/bolt"
	bt "github.com/conveyor-dev/conveyor/broker/brokertest"
)

// BenchmarkReopen measures opening a file that holds pending tasks, ready
// to dispatch: the rebuild of every in-memory index. CONVEYOR_BENCH_TASKS
// sets how many (default 200,000). CONVEYOR_BENCH_FILE names a file to
// keep: filled on the first run, reopened as it is by later ones (with the
// same CONVEYOR_BENCH_TASKS), so that builds can be compared on one file
// without filling ten million tasks each time.
func BenchmarkReopen(b *testing.B) {
	n := bolt.BenchTasks(b, 200_000)
	path := os.Getenv("CONVEYOR_BENCH_FILE")
	fill := n
	if path == "" {
		path = filepath.Join(b.TempDir(), "conveyor.db")
	} else if _, err := os.Stat(path); err == nil {
		fill = 0
	}
	e, err := bolt.Open(bolt.Config{Path: path})
	if err != nil {
		b.Fatal(err)
	}
	batch := make([]broker.NewTask, 1000)
	for left := fill; left > 0; left -= len(batch) {
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
