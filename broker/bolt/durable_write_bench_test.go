package bolt_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/conveyor-dev/conveyor/broker"
	"github.com/conveyor-dev/conveyor/broker/bolt"
	bt "github.com/conveyor-dev/conveyor/broker/brokertest"
)

// BenchmarkDurableWrite compares what one small group commit costs today
// (ten enqueues: a bbolt transaction, two fdatasyncs) with what a
// write-ahead log in front of the B+tree would pay for the same ten tasks
// (their records appended to a preallocated file, one fdatasync). It
// measures whether such a log would pay; see docs/benchmarks.md.
func BenchmarkDurableWrite(b *testing.B) {
	const perCommit = 10
	b.Run("bbolt-commit", func(b *testing.B) {
		e := openEngine(b, bolt.Config{})
		batch := make([]broker.NewTask, perCommit)
		for i := range batch {
			batch[i] = bt.NewTask("q")
		}
		for b.Loop() {
			bt.Enqueue(b, e, bt.T0, batch...)
		}
	})
	b.Run("log-append", func(b *testing.B) {
		f, err := os.OpenFile(filepath.Join(b.TempDir(), "log"), os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			b.Fatal(err)
		}
		defer func() { _ = f.Close() }()
		// About what ten tasks' spec and status records take, in whole
		// pages as a log would write them, cycling over a file written
		// once beforehand (so no write allocates blocks).
		rec := make([]byte, 4096)
		const size = 64 << 20
		if _, err := f.WriteAt(make([]byte, size), 0); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
		off := int64(0)
		for b.Loop() {
			if _, err := f.WriteAt(rec, off); err != nil {
				b.Fatal(err)
			}
			if err := fdatasync(f); err != nil {
				b.Fatal(err)
			}
			off = (off + int64(len(rec))) % size
		}
	})
}
