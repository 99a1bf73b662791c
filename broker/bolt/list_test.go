package bolt_test

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/conveyor-dev/conveyor/broker"
	"github.com/conveyor-dev/conveyor/broker/bolt"
	bt "github.com/conveyor-dev/conveyor/broker/brokertest"
)

// TestListPageBoundedByResults: a page stops early once its tasks hold a
// few MiB, counting their results (and metadata), not only their
// payloads: a thousand completed tasks with 1 MiB results would otherwise
// make one answer of a gigabyte. The listing still covers every task.
func TestListPageBoundedByResults(t *testing.T) {
	e := openEngine(t, bolt.Config{Path: filepath.Join(t.TempDir(), "conveyor.db")})
	const n = 12
	tasks := make([]broker.NewTask, n)
	for i := range tasks {
		tasks[i] = bt.NewTask("q")
	}
	bt.Enqueue(t, e, bt.T0, tasks...)
	result := bytes.Repeat([]byte("r"), 1<<20)
	for _, l := range bt.Lease(t, e, "s", "q", n, bt.T0, bt.TTL) {
		bt.Decide(t, e, broker.Completed("s", bt.Ref(l), bt.T0, result))
	}
	seen, pages := 0, 0
	for cursor := ""; ; pages++ {
		page, err := e.ListTasks(t.Context(), broker.ListParams{Queue: "q", Cursor: cursor, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		held := 0
		for _, task := range page.Tasks {
			held += len(task.Result)
		}
		if held > 5<<20 {
			t.Fatalf("page %d holds %d tasks with %d bytes of results; want it to stop near 4 MiB", pages, len(page.Tasks), held)
		}
		seen += len(page.Tasks)
		if cursor = page.Next; cursor == "" {
			break
		}
	}
	if seen != n || pages < 2 {
		t.Fatalf("the listing met %d tasks in %d pages; want all %d, in several pages", seen, pages+1, n)
	}
}
