package bolt_test

import (
	"bytes"
	"testing"

	"github.com/conveyor-dev/conveyor/broker"
	"github.com/conveyor-dev/conveyor/broker/bolt"
	bt "github.com/conveyor-dev/conveyor/broker/brokertest"
)

// BenchmarkListLargeTasks lists a page of 500 pending tasks of 256 KiB
// payloads, the page a bulk action asks for: "full" as the dashboard's
// listing reads them (a page stops at the answer's byte bound, so it
// holds fewer), "brief" as a bulk action reads them. Per task listed.
func BenchmarkListLargeTasks(b *testing.B) {
	for _, brief := range []bool{false, true} {
		name := "full"
		if brief {
			name = "brief"
		}
		b.Run(name, func(b *testing.B) {
			e := openEngine(b, bolt.Config{})
			batch := make([]broker.NewTask, 100)
			for i := range batch {
				batch[i] = bt.NewTask("q")
				batch[i].Payload = bytes.Repeat([]byte("x"), 256<<10)
			}
			for range 5 {
				bt.Enqueue(b, e, bt.T0, batch...)
			}
			listed := 0
			for b.Loop() {
				page, err := e.ListTasks(b.Context(), broker.ListParams{Queue: "q", State: broker.StatePending, Limit: 500, Brief: brief})
				if err != nil {
					b.Fatal(err)
				}
				listed += len(page.Tasks)
			}
			b.ReportMetric(float64(listed)/float64(b.N), "tasks/page")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(listed), "ns/task")
		})
	}
}
