package bolt

import (
	"cmp"
	"context"
	cryptorand "crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"
	bbolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/conveyor-dev/conveyor/broker"
	storagev1 "github.com/conveyor-dev/conveyor/gen/conveyor/storage/v1"
)

// Config configures an Engine. It holds only storage settings: every
// policy (retention, backoff, lease grace, the initial state) is the
// caller's, passed in with each call.
type Config struct {
	// Path is the bbolt file. Its directory is created if missing. Required.
	Path string
	// Notifier receives ready and timer signals. Defaults to broker.NopNotifier.
	Notifier broker.Notifier
	// Logger receives the engine's logs. Defaults to discarding them.
	Logger *slog.Logger
	// Now is used where the engine needs the time on its own (opening the
	// file, generating ids). Defaults to time.Now.
	Now func() time.Time
	// MaxCommitLinger bounds how long the committer holds a commit back to
	// let callers it just served join the next one (see committer.linger).
	// Defaults to 1ms; a negative value disables lingering.
	MaxCommitLinger time.Duration
	// GroupDefaults is the group policy of queues that do not set their
	// own: the server passes its configured defaults. A zero field fires
	// groups at once on that trigger (a zero MaxSize: never by size).
	GroupDefaults broker.GroupPolicy
	// AsyncCommitDelay is how long a batch of changes that no caller waits
	// for (leases, results, heartbeats, progress) may collect more before
	// it commits. Defaults to 5ms; a negative value commits at once.
	AsyncCommitDelay time.Duration
	// OnCommit, when set, is told of each group commit that succeeded,
	// outside the engine's lock (for metrics: it must return quickly).
	OnCommit func(broker.Commit)

	// commitFault, set by tests, runs before each commit; an error it
	// returns stands for the storage refusing the commit.
	commitFault func() error
	// afterOpenFile, set by tests, runs once the file is open, before its
	// lock is taken.
	afterOpenFile func()
	// mmapSize, set by tests, replaces the address space reserved for the
	// file, so that a small file grows past it and remaps.
	mmapSize int
	// afterTxCommit, set by tests, runs once an EnqueueTx's commit is
	// durable, before the call reads the existing tasks its items name.
	afterTxCommit func()
	// compactSlack, set by tests, replaces compactSlack (compact.go), so
	// that a few tasks make a FIFO compact.
	compactSlack int
}

func (c *Config) setDefaults() {
	if c.Notifier == nil {
		c.Notifier = broker.NopNotifier{}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.MaxCommitLinger == 0 {
		c.MaxCommitLinger = time.Millisecond
	}
	if c.AsyncCommitDelay == 0 {
		c.AsyncCommitDelay = 5 * time.Millisecond
	}
	if c.compactSlack == 0 {
		c.compactSlack = compactSlack
	}
}

// Engine is the embedded bbolt broker. The file is the durable truth; the
// in-memory indexes (ready FIFOs, timers, leases, unique keys, counts) are
// derived from it on Open. Every state change is decided in memory under one
// mutex, which also orders the change's write into the group-commit queue,
// so the file sees changes in exactly the order they were decided.
type Engine struct {
	cfg  Config
	db   *bbolt.DB
	log  *slog.Logger
	note broker.Notifier

	mu     sync.Mutex
	closed bool
	tasks  *table // live tasks
	// queues is indexed by queue.index; a deleted queue leaves its slot
	// nil, listed in freeQueues for the next new queue (deletequeue.go).
	queues     []*queue
	freeQueues []uint16
	byName     map[string]*queue
	// kinds are the task kinds seen, numbered by kindIDs (route.go).
	kinds   []broker.Kind
	kindIDs map[broker.Kind]kindID
	// releases are the worker releases seen (release.go).
	releases map[string]*storagev1.ReleaseRecord
	leases   map[key]*lease
	unique   map[string]uniqueClaim
	uniqOf   map[key]string // live task → its unique key
	// expires holds, for live tasks with an expiry or a deadline, the
	// earlier of the two: a task still waiting then is archived.
	expires map[key]int64
	// ranPastExpiry holds the ACTIVE tasks whose expiry entry a timer
	// round dropped, its time having come while they ran: their entry is
	// indexed again when their attempt ends (applyLocked).
	ranPastExpiry map[key]struct{}
	// retention holds the per-task retention (ns) of live tasks that set one.
	retention map[key]int64
	// ckeys are the live concurrency keys, keyOf the key of each live
	// task that has one (limits.go).
	ckeys map[ckeyID]*ckey
	keyOf map[key]*ckey
	// settling holds tasks that left memory (became terminal, or were
	// changed while terminal) whose change is not durable yet; reads of
	// those tasks wait for the commit.
	settling map[key]settled
	// deps maps a live task to the BLOCKED tasks that wait for it, and
	// depGen each BLOCKED task with edges to its incarnation, which its
	// edges carry (deps.go).
	deps    map[key][]depEdge
	depGen  map[key]uint32
	depGens uint32
	// depEndedAt holds, for a BLOCKED task some of whose dependencies
	// have ended, when the latest of those ended (Unix ns): decisions
	// read their Now before they take the lock, so the dependency that
	// releases the task may carry an older Now than one applied before
	// it, and the task must not be ready before either.
	depEndedAt map[key]int64
	// crons holds every cron entry (cron.go).
	crons map[string]*storagev1.CronRecord
	// openGroups are the aggregation groups gathering, groupHeap their
	// fire times (groups.go).
	openGroups map[groupID]*group
	groupHeap  groupHeap
	// memberGen is the group each AGGREGATING task joined, and its
	// incarnation, which its entry there carries (groups.go).
	memberGen  map[key]memberOf
	memberGens uint32
	dueHeap    timedIndex
	expHeap    timedIndex
	// dueCheckAt is the size of dueHeap past which it is next checked for
	// staleness (tidyDueLocked).
	dueCheckAt int
	leaseHeap  leaseHeap
	// purgeNext is the earliest own-retention purge time in the file, and
	// endedFirst the earliest end time of each retention class (0: none),
	// kept so that a purge that has nothing to do costs nothing.
	purgeNext  int64
	endedFirst [numClasses]int64
	nextToken  uint64
	entropy    *ulid.MonotonicEntropy
	lastID     ulid.ULID

	// purging counts the Purge commits not applied yet, and purgeHorizons
	// holds the latest horizons any Purge was given (fileread.go).
	purging       int
	purgeHorizons [1 + numClasses]int64

	// clockStart is the first time a caller gave the engine since it
	// opened (PromoteDue's, Unix ns; 0: none yet): rate buckets start
	// empty then (refillLocked).
	clockStart int64
	// rateWaits are the queues whose sessions wait for their rate bucket
	// to refill (queue.rateWakeAt); PromoteDue wakes them, and
	// promoteNext is the time it last said it should run next (0: none),
	// so that only an earlier refill signals TimersChanged (ratelimit.go).
	rateWaits   map[*queue]struct{}
	promoteNext int64

	commit committer
	grower tableGrower

	// bounded counts the queues with a MaxWaiting bound (bound.go): while
	// it is 0, an enqueue checks no bound.
	bounded int
}

// Open opens (creating if needed) the bbolt file and rebuilds the in-memory
// indexes from it. Tasks that were ACTIVE when the file was last closed are
// made PENDING again with no retry increment: the worker that held them is
// gone, and that is not the task's fault.
func Open(cfg Config) (*Engine, error) {
	if cfg.Path == "" {
		return nil, errors.New("bolt: Config.Path is required")
	}
	cfg.setDefaults()
	// The path as Info reports it, to readers who cannot know this
	// process's working directory.
	path, err := filepath.Abs(cfg.Path)
	if err != nil {
		return nil, fmt.Errorf("data file path: %w", err)
	}
	cfg.Path = path
	if err := os.MkdirAll(filepath.Dir(cfg.Path), 0o750); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	var db *bbolt.DB
	err = ReadGuarded(cfg.Path, func() (err error) {
		db, err = openFile(cfg.Path, cmp.Or(cfg.mmapSize, 1<<30), cfg.afterOpenFile)
		return err
	})
	if err != nil {
		return nil, err
	}
	e := &Engine{
		cfg:     cfg,
		db:      db,
		log:     cfg.Logger,
		note:    cfg.Notifier,
		entropy: ulid.Monotonic(cryptorand.Reader, 0),
	}
	e.grower.init(e)
	if err := ReadGuarded(cfg.Path, e.load); err != nil {
		_ = db.Close()
		return nil, err
	}
	e.commit.start(e)
	e.grower.start()
	return e, nil
}

// openFile opens the bbolt file at path and holds its lock. A file put in
// place of path while this process waited for the lock (conveyor compact
// renames its copy over the file while it still holds the old one's lock)
// would leave the engine on the replaced file, where every later write is
// lost: so once the lock is held, path must still name the file locked, or
// the open starts over on the new one.
func openFile(path string, mmapSize int, afterOpen func()) (*bbolt.DB, error) {
	for attempt := 1; ; attempt++ {
		var opened *os.File
		db, err := bbolt.Open(path, 0o600, &bbolt.Options{
			Timeout: 2 * time.Second,
			// The freelist is written with every commit (a page or two)
			// rather than rebuilt on open: rebuilding walks every page of
			// the file, over a second for a million tasks.
			FreelistType: bbolt.FreelistMapType,
			// Reserve address space up front so that growing the file
			// rarely remaps (a remap waits for every reader).
			InitialMmapSize: mmapSize,
			OpenFile: func(name string, flag int, perm os.FileMode) (*os.File, error) {
				f, err := os.OpenFile(name, flag, perm)
				opened = f
				if afterOpen != nil {
					afterOpen()
				}
				return f, err
			},
		})
		if err != nil {
			return nil, fmt.Errorf("open %s: %w", path, err)
		}
		same, err := namesFile(path, opened)
		if err == nil && same {
			return db, nil
		}
		_ = db.Close()
		if err != nil {
			return nil, fmt.Errorf("open %s: %w", path, err)
		}
		if attempt == 3 {
			return nil, fmt.Errorf("open %s: the file was replaced while this process waited for its lock, %d times", path, attempt)
		}
	}
}

// namesFile reports whether path is the file f has open.
func namesFile(path string, f *os.File) (bool, error) {
	held, err := f.Stat()
	if err != nil {
		return false, err
	}
	now, err := os.Stat(path)
	if err != nil {
		return false, err
	}
	return os.SameFile(held, now), nil
}

// Close flushes pending writes, stops the committer and closes the file.
func (e *Engine) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	e.mu.Unlock()
	e.commit.stop()
	e.grower.stop()
	e.mu.Lock()
	e.freeIndexesLocked()
	e.mu.Unlock()
	tx, ops := e.CommitStats()
	e.log.Info("store closed", "commits", tx, "ops", ops, "ops_per_commit", float64(ops)/float64(max(tx, 1)),
		"commit_seconds", e.commit.busy.Seconds())
	return e.db.Close()
}

// EngineName is what Info reports as the engine.
const EngineName = "bbolt"

// Sync waits until every change applied so far is durable.
func (e *Engine) Sync(ctx context.Context) error {
	e.mu.Lock()
	b := e.commit.syncPointLocked()
	e.mu.Unlock()
	if b == nil {
		return nil
	}
	return e.commit.wait(ctx, b)
}

// FileStats reports the data file's size and free pages; see
// broker.FileStater.
func (e *Engine) FileStats() (broker.FileStats, error) {
	fi, err := os.Stat(e.cfg.Path)
	if err != nil {
		return broker.FileStats{}, err
	}
	return broker.FileStats{SizeBytes: fi.Size(), FreePages: int64(e.db.Stats().FreePageN)}, nil
}

// Info describes the engine.
func (e *Engine) Info(context.Context) (broker.Info, error) {
	info := broker.Info{Engine: EngineName, DataPath: e.cfg.Path}
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, q := range e.queues {
		if q == nil {
			continue
		}
		for s, n := range q.counts {
			info.Counts[s] += n
		}
	}
	return info, nil
}

// newIDLocked returns a fresh ULID for time now, strictly increasing.
func (e *Engine) newIDLocked(now time.Time) key {
	id, err := ulid.New(ulid.Timestamp(now), e.entropy)
	if err != nil || id.Compare(e.lastID) <= 0 {
		// The clock went backwards or the entropy overflowed within one
		// millisecond: continue from the last id instead.
		id = e.lastID
		incrementULID(&id)
	}
	e.lastID = id
	return id
}

func incrementULID(id *ulid.ULID) {
	for i := len(id) - 1; i >= 6; i-- {
		id[i]++
		if id[i] != 0 {
			return
		}
	}
}

// freeIndexesLocked releases the off-heap index memory.
func (e *Engine) freeIndexesLocked() {
	if e.tasks != nil {
		e.tasks.free()
	}
	for _, q := range e.queues {
		if q == nil {
			continue
		}
		for p := range q.ready {
			q.ready[p].free()
		}
		q.freeReadyPass()
		q.freePassed()
	}
	for _, c := range e.ckeys {
		c.freeHeld()
	}
}

// tooManyQueues refuses the new queue name when the engine knows
// maxQueues. The refusal lasts until an empty queue is deleted.
func tooManyQueues(name string) error {
	return fmt.Errorf("%w: queue %q would be new, and the server already knows %d queues, its limit; delete empty queues to make room",
		broker.ErrResourceExhausted, name, maxQueues)
}

// checkQueueLocked fails when name is a new queue and there is no room
// for another.
func (e *Engine) checkQueueLocked(name string) error {
	if e.byName[name] == nil && e.liveQueuesLocked() >= maxQueues {
		return tooManyQueues(name)
	}
	return nil
}

// queueLocked returns the named queue, creating it in memory if needed
// (callers check checkQueueLocked first: a queue past the limit would wrap
// the 16-bit index, so it is refused here too, loudly).
func (e *Engine) queueLocked(name string) *queue {
	if q := e.byName[name]; q != nil {
		return q
	}
	q := &queue{name: name}
	if n := len(e.freeQueues); n > 0 {
		q.index = e.freeQueues[n-1]
		e.freeQueues = e.freeQueues[:n-1]
		e.queues[q.index] = q
	} else {
		if len(e.queues) >= maxQueues {
			panic(fmt.Sprintf("bolt: queue %q would be queue %d, past the limit of %d", name, len(e.queues)+1, maxQueues))
		}
		q.index = uint16(len(e.queues))
		e.queues = append(e.queues, q)
	}
	e.byName[name] = q
	return q
}

var errClosed = fmt.Errorf("bolt: %w", broker.ErrClosed)

// view runs fn in a read transaction taken outside Engine.mu, where Close
// may have closed the file meanwhile; that case reports ErrClosed.
func (e *Engine) view(fn func(tx *bbolt.Tx) error) error {
	err := e.db.View(fn)
	if errors.Is(err, berrors.ErrDatabaseNotOpen) {
		return errClosed
	}
	return err
}

var (
	_ broker.Broker        = (*Engine)(nil)
	_ broker.Syncer        = (*Engine)(nil)
	_ broker.CommitStatser = (*Engine)(nil)
	_ broker.StorageHealth = (*Engine)(nil)
	_ broker.FileStater    = (*Engine)(nil)
)

// StorageError is the error of the latest group commit while the storage
// refuses commits (a full disk, an I/O error), nil when commits succeed.
// While it is set, enqueues wait (bounded by their contexts) and the
// engine retries the same batch; see committer.commitRetrying.
func (e *Engine) StorageError() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.commit.storageErr
}

// CommitStats reports how many group-commit transactions ran and how many
// ops they carried, so tests and benchmarks can see how much was merged.
func (e *Engine) CommitStats() (transactions, ops int64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.commit.transactions, e.commit.ops
}

// Check verifies the bbolt file's page structure (bbolt's own consistency
// check). Tests run it at cleanup. It runs in a read-write transaction,
// which it rolls back: bbolt's check reads the freelist, which is only safe
// while no other write transaction (a group commit) runs.
func (e *Engine) Check() error {
	tx, err := e.db.Begin(true)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	var first error
	// Drain every error: the checker goroutine blocks until it is read.
	for err := range tx.Check() {
		if first == nil {
			first = err
		}
	}
	return first
}
