package bolt

import "testing"

// LeaseHeapSize reports how many entries the lease heap holds and the
// capacity of its array, for tests of its memory.
func LeaseHeapSize(e *Engine) (n, capacity int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.leaseHeap), cap(e.leaseHeap)
}

// SetCommitFault makes every commit first call fault; an error it returns
// stands for the storage refusing the commit (a full disk).
func SetCommitFault(cfg *Config, fault func() error) { cfg.commitFault = fault }

// SetAfterOpenFile makes Open call fn once it has opened the file, before
// it takes the file's lock.
func SetAfterOpenFile(cfg *Config, fn func()) { cfg.afterOpenFile = fn }

// SetMmapSize makes Open reserve n bytes of address space for the file
// instead of 1 GiB, so that a test's file grows past it and remaps.
func SetMmapSize(cfg *Config, n int) { cfg.mmapSize = n }

// SetAfterTxCommit makes EnqueueTx call fn once its commit is durable,
// before it reads the existing tasks its items name.
func SetAfterTxCommit(cfg *Config, fn func()) { cfg.afterTxCommit = fn }

// BenchTasks is how many tasks a benchmark uses: CONVEYOR_BENCH_TASKS, or
// def when it is unset.
func BenchTasks(b *testing.B, def int) int { return benchTasks(b, def) }

// TaskTable reports the live-task table's size in slots, the keys it
// holds, and whether a growth is under way.
func TaskTable(e *Engine) (slots, keys int, growing bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.tasks.slots), e.tasks.len(), e.tasks.old != nil
}

// ExpiryIndexSize reports how many entries the expiry index holds, stale
// ones included.
func ExpiryIndexSize(e *Engine) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.expHeap.len()
}

// DueIndexSize reports how many entries the due-time index holds, stale
// ones included.
func DueIndexSize(e *Engine) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.dueHeap.len()
}
