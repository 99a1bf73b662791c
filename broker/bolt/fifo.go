package bolt

// fifo is a queue of task keys (a queue's ready tasks of one priority, a
// concurrency key's held tasks of one priority), kept in blocks. A push
// never moves what is queued: when the last block is full, a new one is
// added, sized for the queue's length (a power of two from fifoMinBlock to
// fifoMaxBlock keys), and a pop releases each block it empties. So a deep
// queue costs its length within a block, where a ring that doubles both
// copies millions of keys while the broker's lock is held and keeps up to
// twice the room.
//
// Small blocks are on the Go heap: a queue dispatched as fast as it is fed
// empties at every pop, and mapping and unmapping a block each time would
// cost three system calls a task. A drained queue keeps its block for the
// next push if it is of the smallest size (256 bytes: bounded memory for
// the 655,350 queue priorities a server can hold), and drops any other.
// Blocks from fifoMapBlock keys on are mapped outside the heap (see
// allocOffHeap), so that the collector's heap goal does not count them.
//
// A fifo holds keys only; whether each still stands for a waiting task is
// its owner's business. Owners delete lazily: a task that leaves without
// being popped leaves its key behind, skipped when popped, and a
// compaction pass drops such keys before they pile up (compact.go).
type fifo struct {
	blocks     []fifoBlock // oldest first
	head, tail int         // the next key to pop in blocks[0], to push in the last block
	n          int
}

type fifoBlock struct {
	keys    []key
	release func() // nil: on the Go heap
}

const (
	fifoMinBlock = 16      // 256 bytes
	fifoMapBlock = 4096    // 64 KiB
	fifoMaxBlock = 1 << 16 // 1 MiB
)

func (f *fifo) len() int { return f.n }

func (f *fifo) push(k key) {
	if len(f.blocks) == 0 || f.tail == len(f.blocks[len(f.blocks)-1].keys) {
		f.blocks = append(f.blocks, newFIFOBlock(f.n))
		f.tail = 0
	}
	f.blocks[len(f.blocks)-1].keys[f.tail] = k
	f.tail++
	f.n++
}

// newFIFOBlock makes a block for a queue that holds n keys.
func newFIFOBlock(n int) fifoBlock {
	size := fifoMinBlock
	for size < n && size < fifoMaxBlock {
		size *= 2
	}
	if size < fifoMapBlock {
		return fifoBlock{keys: make([]key, size)}
	}
	keys, release := allocOffHeap[key](size)
	return fifoBlock{keys: keys, release: release}
}

func (f *fifo) pop() (key, bool) {
	if f.n == 0 {
		return key{}, false
	}
	k := f.blocks[0].keys[f.head]
	f.head++
	f.n--
	switch {
	case f.n == 0:
		f.emptied()
	case f.head == len(f.blocks[0].keys):
		f.dropFirst()
	}
	return k, true
}

// clear drops every key, as popping them all would.
func (f *fifo) clear() {
	if f.n == 0 {
		return
	}
	f.n = 0
	f.emptied()
}

// emptied keeps the one block of a queue just emptied if it is of the
// smallest size, ready for the next push, and releases it otherwise.
func (f *fifo) emptied() {
	if len(f.blocks) == 1 && len(f.blocks[0].keys) == fifoMinBlock {
		f.head, f.tail = 0, 0
		return
	}
	f.free()
}

// dropFirst releases the first block, all of whose keys are popped.
func (f *fifo) dropFirst() {
	if r := f.blocks[0].release; r != nil {
		r()
	}
	f.blocks[0] = fifoBlock{}
	f.blocks = f.blocks[1:]
	f.head = 0
}

// free releases every block; the fifo is empty and usable after.
func (f *fifo) free() {
	for _, b := range f.blocks {
		if b.release != nil {
			b.release()
		}
	}
	*f = fifo{}
}

// first returns the first key from the head that valid accepts, popping
// nothing: its cost is the stale entries before it.
func (f *fifo) first(valid func(key) bool) (key, bool) {
	for i, b := range f.blocks {
		start, end := 0, len(b.keys)
		if i == 0 {
			start = f.head
		}
		if i == len(f.blocks)-1 {
			end = f.tail
		}
		for _, k := range b.keys[start:end] {
			if valid(k) {
				return k, true
			}
		}
	}
	return key{}, false
}
