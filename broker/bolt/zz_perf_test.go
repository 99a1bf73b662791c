package bolt

import (
	"context"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
)

func BenchmarkZZConcurrentEnqueue(b *testing.B) {
	e, err := Open(Config{Path: filepath.Join(b.TempDir(), "x.db")})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	payload := make([]byte, 128)
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	for g := 0; g < 32; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				_, err := e.Enqueue(context.Background(), broker.EnqueueParams{Now: time.Now(), Tasks: []broker.NewTask{{Queue: "default", Type: "bench", Payload: payload, Priority: 4, MaxRetry: 25}}})
				if err != nil {
					panic(err)
				}
			}
		}()
	}
	wg.Wait()
	tx, ops := e.CommitStats()
	b.ReportMetric(float64(ops)/float64(tx), "ops/tx")
}

func BenchmarkZZSerialEnqueue(b *testing.B) {
	e, err := Open(Config{Path: filepath.Join(b.TempDir(), "x.db")})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	payload := make([]byte, 128)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		_, err := e.Enqueue(context.Background(), broker.EnqueueParams{Now: time.Now(), Tasks: []broker.NewTask{{Queue: "default", Type: "bench", Payload: payload, Priority: 4, MaxRetry: 25}}})
		if err != nil {
			panic(err)
		}
	}
}
