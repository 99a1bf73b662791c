package bolt

import (
	"testing"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
	bt "github.com/conveyor-dev/conveyor/broker/brokertest"
)

// readyEntries reports how many entries q's ready FIFOs hold, stale ones
// included, and q's ready count.
func readyEntries(e *Engine, queue string) (entries, readyN int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	q := e.byName[queue]
	return q.readyEntries(), q.readyN
}

// TestStaleReadyEntriesDropped checks that the ready entries of tasks that
// left the ready line without being popped (expired, canceled, deleted)
// do not outlive the last ready task of their queue: a queue with nothing
// ready is never popped, so they would stay forever, and the next Lease
// would walk them all under the engine's lock.
func TestStaleReadyEntriesDropped(t *testing.T) {
	t.Parallel()
	e := openTestEngine(t, Config{})
	const n = 5000 // across several FIFO block sizes
	enqueue := func(expires time.Time) []string {
		tasks := make([]broker.NewTask, n)
		for i := range tasks {
			tasks[i] = bt.NewTask("q")
			tasks[i].ExpiresAt = expires
		}
		ids := make([]string, n)
		for i, task := range bt.Enqueue(t, e, bt.T0, tasks...) {
			ids[i] = task.ID
		}
		return ids
	}
	requireEntries := func(what string, want int) {
		t.Helper()
		if got, readyN := readyEntries(e, "q"); got != want {
			t.Fatalf("%s: the ready FIFOs hold %d entries for %d ready tasks, want %d", what, got, readyN, want)
		}
	}

	enqueue(bt.T0.Add(time.Second))
	if _, err := e.PromoteDue(t.Context(), bt.T0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	requireEntries("every task expired", 0)

	ids := enqueue(time.Time{})
	res, err := e.Act(t.Context(), broker.ActParams{Action: broker.ActionCancel, IDs: ids[1:], Now: bt.T0})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("cancel %s: %v", ids[1+i], r.Err)
		}
	}
	// The entries of the canceled tasks outnumber the ready one's by more
	// than the slack: a compaction pass has dropped most of them.
	if got, readyN := readyEntries(e, "q"); got > 2*readyN+compactSlack {
		t.Fatalf("all but the first canceled: the ready FIFOs hold %d entries for %d ready tasks, want at most %d",
			got, readyN, 2*readyN+compactSlack)
	}
	if l := bt.LeaseOne(t, e, "s", "q", bt.T0); l.Task.ID != ids[0] {
		t.Fatalf("leased %s, want %s", l.Task.ID, ids[0])
	}
	requireEntries("the last ready task leased", 0)

	ids = enqueue(time.Time{})
	if res, err := e.Act(t.Context(), broker.ActParams{Action: broker.ActionDelete, IDs: ids, Now: bt.T0}); err != nil || res[n-1].Err != nil {
		t.Fatalf("delete: %v", err)
	}
	requireEntries("every task deleted", 0)
}

// TestFIFOClear checks that a cleared fifo holds nothing, keeps at most one
// block of the smallest size, and works as a fresh one after.
func TestFIFOClear(t *testing.T) {
	t.Parallel()
	var f fifo
	defer f.free()
	for _, n := range []int{0, 1, fifoMinBlock, 3 * fifoMapBlock} {
		for i := range n {
			f.push(key{byte(i), byte(i >> 8)})
		}
		f.clear()
		if f.len() != 0 || len(f.blocks) > 1 || len(f.blocks) == 1 && len(f.blocks[0].keys) != fifoMinBlock {
			t.Fatalf("after clearing %d keys: len %d, %d blocks", n, f.len(), len(f.blocks))
		}
		if _, ok := f.pop(); ok {
			t.Fatalf("after clearing %d keys: pop returned a key", n)
		}
		f.push(key{7})
		if k, ok := f.pop(); !ok || k != (key{7}) {
			t.Fatalf("after clearing %d keys: pop = %x, %v; want the key pushed", n, k, ok)
		}
	}
}
