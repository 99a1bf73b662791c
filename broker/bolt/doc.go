// Package bolt is Conveyor's embedded broker engine, on a single bbolt file.
//
// # Layout
//
// Buckets (all task keys are 16-byte binary ULIDs, so scans run in id order):
//
//	meta    schema version
//	tasks   id → TaskSpec, the immutable part, written once
//	live    id → TaskStatus of every non-terminal task
//	done    id → TaskStatus of terminal tasks, until purged
//	purge   purge_at ‖ id → (empty), the time-ordered purge index
//	queues  name → QueueRecord: paused flag and terminal-task counts
//
// # Memory and file
//
// Every decision (which task to lease, whether a unique key is free, what
// a Result does) is made on in-memory indexes under one mutex: a 24-byte
// pointer-free record per live task in an open-addressing table, a FIFO per
// queue and priority, heaps for due times, expiries and lease expiries, and
// the unique-key table. The table and the FIFOs live in memory mapped
// outside the Go heap (offheap_unix.go), so a million pending tasks do not
// double the garbage collector's heap goal.
// The same critical section appends the decision's write to the open
// group-commit batch, so the file applies writes in decision order. On Open
// the indexes are rebuilt from the live bucket alone; terminal tasks are
// never scanned.
//
// # Group commit
//
// One goroutine commits: it takes the whole open batch, runs it in one
// read-write transaction (bbolt's commit: two fsyncs), runs the batch's
// post-commit hooks, and repeats. Enqueue waits for its batch; a new task
// becomes dispatchable only in the post-commit hook, so no worker ever sees
// a task that a crash could still lose. Lease, Complete, Extend and
// Progress do not wait: a batch holding only such changes collects for up
// to Config.AsyncCommitDelay first, and after a commit that released
// several waiting callers the committer lingers briefly so that they share
// the next one (commit.go explains both).
//
// # Caveats
//
//   - A commit the storage refuses (disk full, I/O error) is retried, the
//     same batch, with a growing pause, until it succeeds or the engine
//     closes; enqueues wait meanwhile and dispatch of durable tasks goes on
//     (StorageError reports the state). An op that finds the file other
//     than memory says fails its batch and every op queued behind it, and
//     the indexes are rebuilt from the file.
//   - A long read transaction delays the file's growth (bbolt remaps only
//     when no reader is open), so readers here are kept short. A Backup is
//     a long reader: while a commit waits for it to remap the file, bbolt
//     makes every new reader wait too. Calls that read the file (Lease for
//     the specs, GetTask, ListTasks, enqueues with a producer-chosen id or
//     dependencies, Act) wait then; no read transaction is ever begun
//     under the engine's mutex, so the calls that need only memory
//     (heartbeats, results, timers) go on.
//   - Within a priority, FIFO order is by when a task became ready; after a
//     restart it is by task id, which is by enqueue time.
package bolt
