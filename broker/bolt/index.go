package bolt

import (
	"container/heap"

	"github.com/conveyor-dev/conveyor/broker"
	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
)

// meta is what the engine keeps in memory for each live task: just enough
// to decide every state change without reading the file. It holds no
// pointers, so the map of a million of them costs the garbage collector
// nothing to scan.
type meta struct {
	due      int64 // next_process_at of a SCHEDULED or RETRY task (Unix ns)
	queue    uint32
	retried  int32
	maxRetry int32
	state    broker.State
	prio     uint8
	flags    metaFlags
}

type metaFlags uint8

const (
	// flagCommitted: the task's enqueue is durable, so it may be dispatched.
	flagCommitted metaFlags = 1 << iota
	// flagInReady: the task has a valid entry in its queue's ready FIFO.
	flagInReady
	// flagCanceled: an operator canceled the task while it ran.
	flagCanceled
)

const (
	statePending   = conveyorv1.TaskState_TASK_STATE_PENDING
	stateScheduled = conveyorv1.TaskState_TASK_STATE_SCHEDULED
	stateActive    = conveyorv1.TaskState_TASK_STATE_ACTIVE
	stateRetry     = conveyorv1.TaskState_TASK_STATE_RETRY
	stateCompleted = conveyorv1.TaskState_TASK_STATE_COMPLETED
	stateArchived  = conveyorv1.TaskState_TASK_STATE_ARCHIVED
	stateCanceled  = conveyorv1.TaskState_TASK_STATE_CANCELED
	stateAggr      = conveyorv1.TaskState_TASK_STATE_AGGREGATING
	stateBlocked   = conveyorv1.TaskState_TASK_STATE_BLOCKED
)

// numStates sizes per-state count arrays (TaskState values are 0..9).
const numStates = 10

// queue is the in-memory state of one queue.
type queue struct {
	name   string
	index  uint32
	paused bool
	// ready holds one FIFO per priority (index 1..9). Entries whose task is
	// no longer pending are skipped when popped (lazy deletion).
	ready [10]fifo
	// readyN counts valid ready entries (tasks with flagInReady).
	readyN    int
	counts    [numStates]int64
	processed int64
	failed    int64
}

func (q *queue) info() broker.QueueInfo {
	return broker.QueueInfo{Name: q.name, Paused: q.paused, Counts: q.counts,
		Processed: q.processed, Failed: q.failed}
}

// fifo is a queue of task keys backed by a slice that is compacted as it
// drains and released when empty.
type fifo struct {
	items []key
	head  int
}

func (f *fifo) push(k key) { f.items = append(f.items, k) }

func (f *fifo) len() int { return len(f.items) - f.head }

func (f *fifo) pop() (key, bool) {
	if f.head >= len(f.items) {
		return key{}, false
	}
	k := f.items[f.head]
	f.head++
	switch {
	case f.head == len(f.items):
		if cap(f.items) > 4096 {
			f.items = nil
		} else {
			f.items = f.items[:0]
		}
		f.head = 0
	case f.head >= 4096 && f.head*2 >= len(f.items):
		n := copy(f.items, f.items[f.head:])
		f.items = f.items[:n]
		f.head = 0
	}
	return k, true
}

// timed is an entry of a time-ordered index. Entries are never removed out
// of order: an entry that no longer matches its task is skipped when it
// reaches the top (lazy deletion), so every update is O(log n).
type timed struct {
	at    int64
	k     key
	token uint64
}

type timedHeap []timed

func (h timedHeap) Len() int           { return len(h) }
func (h timedHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h timedHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *timedHeap) Push(x any)        { *h = append(*h, x.(timed)) }
func (h *timedHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// add pushes an entry and reports whether it became the earliest.
func (h *timedHeap) add(t timed) bool {
	heap.Push(h, t)
	return (*h)[0] == t
}

// peek returns the earliest entry.
func (h timedHeap) peek() (timed, bool) {
	if len(h) == 0 {
		return timed{}, false
	}
	return h[0], true
}

func (h *timedHeap) pop() timed { return heap.Pop(h).(timed) }

// lease is the current lease of an ACTIVE task.
type lease struct {
	session string
	token   uint64
	expiry  int64
	// limit caps every renewal: the task's deadline or timeout plus a
	// grace (0: no cap). A worker that runs past it loses the lease.
	limit int64
}

// uniqueClaim is the holder of a unique key.
type uniqueClaim struct {
	k     key
	until int64 // 0: until the task completes
}
