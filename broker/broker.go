package broker

import (
	"context"
	"io"
	"time"
)

// Broker stores tasks and leases. Every method is atomic and safe for
// concurrent use; slices and maps passed in are not retained, and values
// returned are owned by the caller.
//
// A broker applies decisions; it does not make them. Which state a new
// task starts in, what a worker's outcome or a lapsed lease leads to, when
// a retry is due and how long terminal tasks are kept are decided by the
// caller (see docs/architecture.md) and passed in; the broker keeps only
// the mechanisms (fencing, expiry, promotion, purging by the horizons it
// is given) and the overrides its own state forces (Decision).
type Broker interface {
	// Enqueue stores each task independently: results[i] holds the task or
	// the error for tasks[i] (ErrAlreadyExists for a duplicate id or an
	// active unique key; ErrQueueFull when its queue holds MaxWaiting
	// waiting tasks, earlier tasks of the call included). The returned
	// error is for the call as a whole. Returns once every stored task is
	// durable.
	Enqueue(ctx context.Context, p EnqueueParams) ([]EnqueueResult, error)
	// EnqueueTx stores all tasks or none. A task whose ID already exists is
	// a no-op that returns the existing task in its place, with Existed
	// set (so does a repeat of an earlier item's ID); a unique key held
	// by another task, or shared by two tasks of the call, fails the call
	// with ErrAlreadyExists; new tasks that would take a queue past its
	// MaxWaiting fail it with ErrQueueFull. Returns once the tasks are
	// durable.
	EnqueueTx(ctx context.Context, p EnqueueParams) ([]*Task, error)
	// GetTask returns a task by id, or ErrNotFound. It reflects every
	// change that returned before it was called.
	GetTask(ctx context.Context, id string) (*Task, error)

	// Ready reports how many tasks each named queue has ready to lease right
	// now (0 for a paused or unknown queue); counts[i] is for queues[i].
	// The figure is a hint for dispatch planning, not a reservation.
	Ready(queues []string, counts []int)
	// Lease leases up to pick.N ready tasks from each picked queue to a
	// session, highest priority first and FIFO within a priority. It may
	// return fewer than asked when another session got there first. A task
	// whose deadline has passed is archived instead of leased. A task's
	// StartedAt is p.Now, or the time it became pending if that is later
	// (p.Now is read before calls are serialized, so it may be older than
	// the completion of the dependency that released the task): a
	// dependent never starts before its dependencies completed. A call
	// that fails leaves nothing leased: what it had granted is released,
	// with no retry counted (LeaseGroups likewise).
	Lease(ctx context.Context, p LeaseParams) ([]Lease, error)
	// ReadyGroups reports, for each named queue, how many fired groups of
	// the given types wait to be leased (0 for a paused or unknown queue).
	ReadyGroups(queues, types []string, counts []int)
	// LeaseGroups leases fired groups as batches (protocol §5.11): up to
	// p.N groups of p.Queue whose type is in p.Types, oldest first. A group
	// fires by size at enqueue, or by time (GroupPolicy.FiresAt, the
	// queue's policy with the engine's defaults) when PromoteDue runs. A
	// member whose deadline or expiry has passed is archived instead of
	// leased, as by Lease; a group left with no member is dropped.
	LeaseGroups(ctx context.Context, p GroupLeaseParams) ([]GroupLease, error)
	// Groups lists the groups of a queue (every queue when empty) that
	// wait, open or fired, by queue, group and type.
	Groups(ctx context.Context, queue string) ([]GroupInfo, error)
	// Extend renews leases to p.Now + p.TTL (never past a lease's limit);
	// it returns how many of the named leases were still current.
	Extend(ctx context.Context, p ExtendParams) (int, error)
	// Complete applies a decision about a leased task, fenced by its lease
	// (ErrLeaseLost when stale), and returns the state the task is in after.
	Complete(ctx context.Context, d Decision) (State, error)
	// CompleteBatch applies decisions about leased tasks, each on its own
	// as Complete does (results[i] is for ds[i]: the state after, or its
	// error, ErrLeaseLost when stale), in one step of the engine's: one
	// commit, where its writes are committed together. The error returned
	// is for the call as a whole (nothing was applied).
	CompleteBatch(ctx context.Context, ds []Decision) ([]Completion, error)
	// Release returns leased tasks to pending with no retry increment, for a
	// session that ended; leases that are no longer current are skipped.
	Release(ctx context.Context, p ReleaseParams) error
	// Progress records a running task's progress, fenced by its lease.
	Progress(ctx context.Context, p ProgressParams) error

	// PromoteDue makes due SCHEDULED and RETRY tasks pending, archives
	// waiting tasks whose expiry passed and fires groups whose time came.
	// It returns when it should run next (zero when nothing is waiting on
	// a timer).
	PromoteDue(ctx context.Context, now time.Time) (next time.Time, err error)
	// LapsedLeases lists leases whose expiry is at or before now, for the
	// reaper to decide on, and when the next lease expires (zero: none).
	LapsedLeases(ctx context.Context, now time.Time) (lapsed []LapsedLease, next time.Time, err error)
	// Reclaim applies the reaper's decisions about lapsed leases. A lease
	// that is no longer current, or was renewed past the decision's Now
	// meanwhile, is skipped. Before a task can be leased again the engine
	// tells the session that held it (Notifier.LeaseLapsed), inside the
	// same critical section.
	Reclaim(ctx context.Context, decisions []Decision) error
	// Purge deletes terminal tasks past the horizons p gives, at most
	// p.Limit of them, and tells what remains.
	Purge(ctx context.Context, p PurgeParams) (PurgeNext, error)

	// ListTasks returns a page of a queue's tasks; see ListParams. It
	// reflects every change that returned before it was called.
	ListTasks(ctx context.Context, p ListParams) (ListPage, error)
	// Act applies an operator action to each task on its own: results[i]
	// is for p.IDs[i]. Which states an action applies to is Action.Applies.
	Act(ctx context.Context, p ActParams) ([]ActResult, error)

	// Queues lists every known queue with its counts, sorted by name.
	Queues(ctx context.Context) ([]QueueInfo, error)
	// Queue describes one queue; a queue never seen has zero counts and
	// the default configuration.
	Queue(ctx context.Context, name string) (QueueInfo, error)
	// SetQueuePaused pauses or resumes dispatch from a queue.
	SetQueuePaused(ctx context.Context, queue string, paused bool) (QueueInfo, error)
	// UpdateQueueConfig changes a queue's stored configuration by update,
	// in one step (no other change comes between its read and its write),
	// durably, and applies it to dispatch at once (a MaxWaiting raised or
	// removed signals Notifier.QueueRoom). update must only change the
	// configuration it is given; it runs under the engine's lock.
	UpdateQueueConfig(ctx context.Context, queue string, update func(*QueueConfig)) (QueueInfo, error)
	// DeleteQueue forgets a queue for good, durably: its pause flag, its
	// configuration and its totals go, and a later use of the name starts
	// a fresh queue. A queue never seen (or already deleted) is
	// ErrNotFound. One that still holds a task in any state (counting
	// enqueues not durable yet), or that a cron entry enqueues into (its
	// next fire would bring it back), is ErrInvalidState, with a message
	// that says what is left.
	DeleteQueue(ctx context.Context, queue string) error
	// CreateCron stores a new cron entry, durably; its id must be free
	// (ErrAlreadyExists).
	CreateCron(ctx context.Context, c CronEntry) (CronEntry, error)
	// UpdateCron changes an existing entry (ErrNotFound otherwise) in one
	// step, durably: update gets a copy of the stored entry, which it may
	// change, and returns the entry to store. It runs under the engine's
	// lock, so no other change comes between its read and its write; it
	// must be quick and must not call the broker. The entry keeps its ID
	// and its run history (LastRun, LastFire, LastTaskID, LastError) whatever update
	// returns. An error from update is returned as it is, and nothing is
	// written. Every change an operator makes (a replace, some fields, a
	// pause or a resume) goes through it.
	UpdateCron(ctx context.Context, id string, update func(CronEntry) (CronEntry, error)) (CronEntry, error)
	// Cron returns an entry, or ErrNotFound.
	Cron(ctx context.Context, id string) (CronEntry, error)
	// Crons lists every entry, by id.
	Crons(ctx context.Context) ([]CronEntry, error)
	// DeleteCron removes an entry (ErrNotFound if none).
	DeleteCron(ctx context.Context, id string) error
	// FireCron applies a scheduled fire: it enqueues the fire's task and
	// records the fire on the entry in one commit, so that a fire is never
	// applied twice (ErrAlreadyFired), across restarts and crashes. A
	// paused or missing entry does not fire (ErrInvalidState, ErrNotFound),
	// nor one changed since f.Entry was read (ErrAlreadyFired).
	// The task is nil, and the fire still recorded, with the refusal in
	// the entry's LastError, when the task itself is refused (its unique
	// key is held: ErrAlreadyExists; its queue is full: ErrQueueFull, and
	// the fire is not retried): the error says why. A Skip fire
	// only moves the entry on; it is applied even at or before the last
	// fire, which unsticks an entry a backward clock step left there.
	FireCron(ctx context.Context, f CronFire) (*Task, error)

	// Info describes the engine.
	Info(ctx context.Context) (Info, error)

	// Close stops the engine and closes its store. It is idempotent.
	Close() error
}

// Notifier receives an engine's signals. Its methods are called while the
// engine holds internal locks: they must return quickly and must not call
// back into the broker.
type Notifier interface {
	// TasksReady reports that queue gained ready work.
	TasksReady(queue string)
	// TimersChanged reports that the next promotion, lease expiry or purge
	// may now be due earlier than the timer loops last heard.
	TimersChanged()
	// LeaseLapsed reports a lease the reaper took back, before the task can
	// be leased again, so the session that held it learns of the lapse
	// before any redelivery reaches it.
	LeaseLapsed(l LapsedLease)
	// CronsChanged reports that a cron entry was added, changed, paused,
	// resumed or removed (not fired: a fire only moves an entry later),
	// so the cron scheduler reads the entries anew.
	CronsChanged()
	// QueueRoom reports that queue, which refused a new task for being
	// full (ErrQueueFull), has room for room more tasks (math.MaxInt64
	// once its bound is removed). The engine calls it at every change that
	// leaves the queue room (a task leaving the waiting states, the bound
	// raised or removed, memory rebuilt), from the refusal on, until it
	// answers false: nobody waits for that queue's room any more (the
	// next refusal starts over). So a waiter that registers before it
	// tries, and tries again when signalled, never misses room.
	QueueRoom(queue string, room int64) (waiting bool)
}

// NopNotifier ignores every signal.
type NopNotifier struct{}

// TasksReady does nothing.
func (NopNotifier) TasksReady(string) {}

// TimersChanged does nothing.
func (NopNotifier) TimersChanged() {}

// LeaseLapsed does nothing.
func (NopNotifier) LeaseLapsed(LapsedLease) {}

// CronsChanged does nothing.
func (NopNotifier) CronsChanged() {}

// QueueRoom answers that nobody waits.
func (NopNotifier) QueueRoom(string, int64) bool { return false }

// Optional interfaces an engine may implement; the server checks for them.

// Syncer is an engine that can wait until every change applied so far is
// durable.
type Syncer interface {
	Sync(ctx context.Context) error
}

// Commit describes one durable write of an engine that batches changes
// (a group commit), for metrics.
type Commit struct {
	// Ops is how many changes it carried.
	Ops int
	// Took is how long writing and syncing it took.
	Took time.Duration
}

// CommitStatser is an engine that batches writes into commits and counts
// them.
type CommitStatser interface {
	CommitStats() (commits, ops int64)
}

// StorageHealth is an engine that can report a storage that refuses writes
// (a full disk); nil means healthy.
type StorageHealth interface {
	StorageError() error
}

// Backuper is an engine that can write a consistent copy of its store
// while it runs (the bbolt engine: the file as of one read transaction).
type Backuper interface {
	Backup(ctx context.Context, w io.Writer) (int64, error)
}

// FileStater is an engine that keeps its data in a file of its own (the
// bbolt engine), and can say what the file holds.
type FileStater interface {
	FileStats() (FileStats, error)
}

// FileStats are figures of an engine's data file.
type FileStats struct {
	// SizeBytes is the file's size.
	SizeBytes int64
	// FreePages counts the pages the file holds free for reuse.
	FreePages int64
}

// DatabaseStater is an engine on a database server (PostgreSQL), and can
// say what its tables hold.
type DatabaseStater interface {
	DatabaseStats(ctx context.Context) (DatabaseStats, error)
}

// DatabaseStats are figures of an engine's tables, as the database counts
// them.
type DatabaseStats struct {
	// SizeBytes is what the engine's tables and their indexes take.
	SizeBytes int64
	// LiveTuples and DeadTuples are the database's estimates of the rows
	// of the engine's tables that are live and dead (deleted or updated,
	// not vacuumed yet: bloat).
	LiveTuples, DeadTuples int64
}
