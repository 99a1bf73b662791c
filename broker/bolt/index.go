package bolt

import (
	"container/heap"

	"github.com/conveyor-dev/conveyor/broker"
)

// meta is what the engine keeps in memory for each live task: just enough
// to decide every state change without reading the file. It is 24 bytes
// and holds no pointers (see table).
type meta struct {
	// due is the next_process_at of a SCHEDULED or RETRY task, and when a
	// PENDING task became pending (0: not known, after a restart); Unix ns.
	// A lease never stamps a start before a task became pending, and
	// reports due as when the task became ready (the wait metric).
	due      int64
	retried  int32
	maxRetry int32
	state    broker.State
	// passMark tells a compaction pass over the FIFO that holds the task's
	// entry (its queue's ready FIFO, its key's held one) whether it kept an
	// entry of the task already (compact.go). It fills what was padding.
	passMark bool
	queue    uint16 // index into Engine.queues
	prio     uint8
	flags    metaFlags
	waiting  uint16 // dependencies a BLOCKED task still waits for
	kind     kindID // its type and at-most-once-ness (route.go)
}

// settled is a task that left memory and whose change is not durable yet.
type settled struct {
	n     int          // changes in flight
	state broker.State // the terminal state it took (0: it was deleted)
	at    int64        // when it took it (Unix ns)
}

// maxQueues bounds how many queues the engine knows (meta.queue is 16 bits).
const maxQueues = 1<<16 - 1

type metaFlags uint16

const (
	// flagCommitted: the task's enqueue is durable, so it may be dispatched.
	flagCommitted metaFlags = 1 << iota
	// flagInReady: the task has a valid entry in its queue's ready FIFO.
	flagInReady
	// flagCanceled: an operator canceled the task while it ran.
	flagCanceled
	// flagDeadlineFirst: the task's entry in Engine.expires is its
	// deadline, not its expiry (the message of its archival says which).
	flagDeadlineFirst
	// flagHeld: a pending task waits in its concurrency key's line.
	flagHeld
	// flagDepFailed: a BLOCKED task's dependency failed under
	// ON_FAILURE_BLOCK; it stays blocked whatever its others do.
	flagDepFailed
	// flagUsed marks an occupied table slot.
	flagUsed
	// flagGone marks a slot of an array a growing table moves out of
	// whose key left it early (see table).
	flagGone
	// flagPassed: a ready task waits in its queue's passed-over line for
	// its kind, a routed lease having passed it over (route.go); its entry
	// in the ready FIFO, if any, is stale.
	flagPassed
)

const (
	statePending   = broker.StatePending
	stateScheduled = broker.StateScheduled
	stateActive    = broker.StateActive
	stateRetry     = broker.StateRetry
	stateCompleted = broker.StateCompleted
	stateArchived  = broker.StateArchived
	stateCanceled  = broker.StateCanceled
	stateAggr      = broker.StateAggregating
	stateBlocked   = broker.StateBlocked
)

// queue is the in-memory state of one queue.
type queue struct {
	name   string
	index  uint16
	paused bool
	// ready holds one FIFO per priority (index 1..9). Entries whose task is
	// no longer ready are skipped when popped (lazy deletion); they are all
	// dropped when readyN falls to 0 (a queue with nothing ready is never
	// popped), and a compaction pass drops them once they outnumber the
	// valid ones by more than Config.compactSlack (compact.go).
	ready [10]fifo
	// readyN counts valid ready entries (tasks with flagInReady), the
	// passedN of them in passed-over lines included.
	readyN int
	// passed are the queue's passed-over lines, one per kind, in the order
	// they were made; passedN counts their tasks (route.go).
	passed  []*passedLine
	passedN int
	// readyPass is the compaction pass under way over ready (nil: none);
	// bit p of readyMarks is the mark the last pass over ready[p] gave.
	readyPass  *prioPass
	readyMarks uint16
	counts     broker.Counts
	processed  int64
	failed     int64
	enqueued   int64
	expired    int64
	cfg        broker.QueueConfig
	bucket     bucket
	// rateWakeAt is when its sessions are to be woken for its rate
	// bucket's refill, by PromoteDue (ratelimit.go); 0: not waiting.
	rateWakeAt int64
	// fired are the queue's fired groups waiting for a session that
	// handles their type (firedgroups.go).
	fired firedGroups

	// refused is set when the queue refused a new task for its bound
	// (MaxWaiting), until the notifier answers that nobody waits for its
	// room (bound.go).
	refused bool
}

func (q *queue) info() broker.QueueInfo {
	return broker.QueueInfo{Name: q.name, Paused: q.paused, Counts: q.counts,
		Processed: q.processed, Failed: q.failed, Enqueued: q.enqueued, Expired: q.expired, Config: q.cfg}
}

// timed is an entry of a time-ordered index. Entries are never removed out
// of order: an entry that no longer matches its task is skipped when it
// reaches the top (lazy deletion), so every update is O(log n).
type timed struct {
	at int64
	k  key
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

func (h *timedHeap) pop() timed {
	t := heap.Pop(h).(timed)
	// Give memory back once the heap is much smaller than its array.
	if c := cap(*h); c > 1024 && len(*h) < c/4 {
		*h = append(make(timedHeap, 0, 2*len(*h)), *h...)
	}
	return t
}

// uniqueClaim is the holder of a unique key.
type uniqueClaim struct {
	k     key
	until int64 // 0: until the task completes
	since int64 // when the claim was granted (the task's enqueue)
}
