package main

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
	"github.com/conveyor-dev/conveyor/broker/bolt"
	bt "github.com/conveyor-dev/conveyor/broker/brokertest"
	"github.com/conveyor-dev/conveyor/broker/postgres"
	"github.com/conveyor-dev/conveyor/internal/pgtest"
	"github.com/conveyor-dev/conveyor/server"
)

// copyBenchTasks is how many tasks BenchmarkCopy moves each way.
const copyBenchTasks = 100_000

// BenchmarkCopy measures conveyor copy's rate (tasks/s) each way between
// the engines, on a store of copyBenchTasks tasks: payloads of 200 bytes
// with metadata, most of them pending (a tenth under concurrency keys,
// priorities mixed), some scheduled, grouped, blocked and completed. The
// source is filled through the broker once; the PostgreSQL source is a
// copy of the bbolt one.
func BenchmarkCopy(b *testing.B) {
	boltSrc := filepath.Join(b.TempDir(), "src")
	fillCopyBench(b, filepath.Join(boltSrc, server.DataFile))
	pgSrc := pgtest.Schema(b, b.Name()+"/src")
	benchCopy(b, func() (broker.CopySource, error) { return bolt.OpenCopySource(filepath.Join(boltSrc, server.DataFile)) },
		func() (broker.CopyTarget, error) { return postgres.OpenCopyTarget(b.Context(), pgtest.URL(b), pgSrc) })
	sources := map[string]func() (broker.CopySource, error){
		"Bolt":     func() (broker.CopySource, error) { return bolt.OpenCopySource(filepath.Join(boltSrc, server.DataFile)) },
		"Postgres": func() (broker.CopySource, error) { return postgres.OpenCopySource(b.Context(), pgtest.URL(b), pgSrc) },
	}
	for _, from := range []string{"Bolt", "Postgres"} {
		for _, to := range []string{"Bolt", "Postgres"} {
			b.Run(from+"To"+to, func(b *testing.B) {
				var took time.Duration
				for i := range b.N {
					var target func() (broker.CopyTarget, error)
					if to == "Bolt" {
						path := filepath.Join(b.TempDir(), server.DataFile)
						target = func() (broker.CopyTarget, error) { return bolt.OpenCopyTarget(path) }
					} else {
						schema := pgtest.Schema(b, fmt.Sprintf("%s/%d", b.Name(), i))
						target = func() (broker.CopyTarget, error) {
							return postgres.OpenCopyTarget(b.Context(), pgtest.URL(b), schema)
						}
					}
					took += benchCopy(b, sources[from], target)
				}
				b.ReportMetric(float64(copyBenchTasks*b.N)/took.Seconds(), "tasks/s")
			})
		}
	}
}

// benchCopy copies, timing the copy alone (the stores' opening and closing
// too).
func benchCopy(b *testing.B, open func() (broker.CopySource, error), target func() (broker.CopyTarget, error)) time.Duration {
	b.Helper()
	start := time.Now()
	src, err := open()
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = src.Close() }()
	dst, err := target()
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = dst.Close() }()
	st, err := runCopy(context.Background(), src, dst, func(int64, int64) {})
	if err != nil {
		b.Fatal(err)
	}
	if st.Tasks != copyBenchTasks {
		b.Fatalf("copied %d tasks, want %d", st.Tasks, copyBenchTasks)
	}
	return time.Since(start)
}

// fillCopyBench fills a bbolt store at path with copyBenchTasks tasks.
func fillCopyBench(b *testing.B, path string) {
	b.Helper()
	e, err := bolt.Open(bolt.Config{Path: path})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = e.Close() }()
	payload := make([]byte, 200)
	for i := range payload {
		payload[i] = 'a' + byte(i%26)
	}
	const batch = 1000
	var deps []string
	for n := 0; n < copyBenchTasks-batch; n += batch {
		tasks := make([]broker.NewTask, batch)
		for i := range tasks {
			nt := bt.NewTask(fmt.Sprintf("q%d", (n+i)%4))
			nt.Payload, nt.Priority = payload, int32(1+(n+i)%9)
			nt.Metadata = map[string]string{"tenant": fmt.Sprintf("t%d", i%50)}
			switch j := n + i; {
			case j%10 == 1:
				nt.ConcurrencyKey = fmt.Sprintf("k%d", j%100)
			case j%20 == 2:
				nt.ProcessAt = bt.T0.Add(time.Hour)
			case j%50 == 3:
				nt.Group = fmt.Sprintf("g%d", j%7)
			case j%50 == 4 && len(deps) > 0:
				nt.DependsOn = []broker.Dependency{{TaskID: deps[len(deps)-1]}}
			}
			tasks[i] = nt
		}
		for _, task := range bt.Enqueue(b, e, bt.T0, tasks...) {
			if task.State == broker.StatePending && len(deps) < 100 {
				deps = append(deps, task.ID)
			}
		}
	}
	// The last batch, leased and completed.
	tasks := make([]broker.NewTask, batch)
	for i := range tasks {
		tasks[i] = bt.NewTask("done")
		tasks[i].Payload = payload
	}
	bt.Enqueue(b, e, bt.T0, tasks...)
	for _, l := range bt.Lease(b, e, "s", "done", batch, bt.T0, time.Hour) {
		bt.Succeed(b, e, "s", l, bt.T0)
	}
}
