package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/conveyor-dev/conveyor/broker"
)

// Config configures an Engine. Like the embedded engine's, it holds only
// storage settings: every policy is the caller's, passed in with each call.
type Config struct {
	// URL is the database, a postgres:// URL (or a libpq key=value
	// string). Required.
	URL string
	// Schema, when set, is the schema the engine's tables live in, created
	// if missing; empty uses the connection's search_path (public by
	// default). Tests use one schema per test.
	Schema string
	// Notifier receives the engine's signals. Defaults to broker.NopNotifier.
	Notifier broker.Notifier
	// Logger receives the engine's logs. Defaults to discarding them.
	Logger *slog.Logger
	// GroupDefaults is the group policy of queues that do not set their
	// own, as for the embedded engine.
	GroupDefaults broker.GroupPolicy
	// MaxConns is the connection pool's size, every one opened by Open and
	// kept. Defaults to 8: W1-W4 used no more than 6 at once, and 8 ran
	// them as fast as 16 (docs/benchmarks.md, the eighteenth pass), while
	// each node's pool counts against the database's max_connections
	// whether busy or not.
	MaxConns int32
	// Now is used where the engine needs the time on its own (generating
	// ids, Ready's rate buckets). Defaults to time.Now.
	Now func() time.Time
	// ApplicationName names the engine's connections (pg_stat_activity
	// shows it): conveyor copy refuses a database a server is connected
	// to by it. Defaults to ServerApplicationName, followed by the schema
	// when one is set (Schema, or the URL's search_path), so that a copy
	// into one schema is not refused for a server on another.
	ApplicationName string
	// NodeAddress and NodeVersion describe this node to the others (the
	// conveyor_nodes table, GetClusterInfo).
	NodeAddress, NodeVersion string
	// Liveness is how long a node's heartbeat may lapse before the others
	// declare it dead and release its tasks. Defaults to DefaultLiveness.
	Liveness time.Duration
}

func (c *Config) setDefaults() {
	if c.Notifier == nil {
		c.Notifier = broker.NopNotifier{}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.MaxConns == 0 {
		c.MaxConns = 8
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Liveness <= 0 {
		c.Liveness = DefaultLiveness
	}

}

// Engine is the PostgreSQL broker. The database is the truth: every rule
// that decides what may run (leases and their fencing, concurrency keys,
// unique keys, dependencies, groups) is applied in SQL under row locks, so
// concurrent calls need no lock of the engine's own. Besides the pool, the
// engine keeps hints in memory (hints.go): per-queue counts that make
// Ready, Queues and the signals cheap, and the timers' earliest times.
type Engine struct {
	cfg  Config
	pool *pgxpool.Pool
	// warmNew is set once Open warmed the pool: the connections the pool
	// makes from then on are warmed as they are made (warm.go).
	warmNew atomic.Bool
	log     *slog.Logger
	note    broker.Notifier
	ids     idSource

	mu     sync.Mutex
	closed bool
	hints  hints
	// promoteFloors and purgeFloors bound the timer loops' walks
	// (timefloors.go), under mu.
	promoteFloors, purgeFloors timeFloors
	health                     storageHealth
	// seqSeen is the highest ready_seq a lease of this node was given
	// (floorwatch.go).
	seqSeen atomic.Int64

	// results and leases share the concurrent CompleteBatch and Lease
	// calls' transactions (groupcommit.go, lease_merge.go).
	results commitGroup[*resultCall]
	leases  leaseGroups
	// shapes are the lease statements' shapes warmed (warm.go).
	shapes leaseShapes
	// parked are the leases idle sessions parked for the next enqueue
	// (park.go).
	parked parkedLeases

	// lapses orders a reclaim before a redelivery of its task: Reclaim
	// holds it whole, with its signals, and Lease shares it (see Reclaim).
	lapses sync.RWMutex

	// commits is shared by every commit with its hints' update, and held
	// whole by a resync of the hints (resync.go); hintsStale is set when
	// a commit's outcome was lost, resyncs counts the resyncs running.
	commits    sync.RWMutex
	hintsStale atomic.Bool
	resyncs    sync.WaitGroup
	// remote is held by the application of each other node's
	// notification, and whole by a resync (resync.go); resynced is the
	// snapshot the last resync read under (nil: none), whose
	// transactions the notifications applied after it skip.
	remote   sync.Mutex
	resynced *snapshot

	// cluster is this node's membership and leadership (cluster.go);
	// events carries the hints to and from the other nodes (events.go).
	cluster   cluster
	events    events
	closeOnce sync.Once
}

var errClosed = fmt.Errorf("postgres: %w", broker.ErrClosed)

// Open connects to the database, applies the schema migrations the
// database lacks (under an advisory lock, so nodes starting together
// agree), refuses a schema newer than this binary, opens and warms the
// pool's connections (warm.go), listens for the other
// nodes' notifications, loads its hints, and joins the nodes (leading them
// when nobody does; the leader releases the tasks a node that died left
// ACTIVE, once its liveness lapsed).
func Open(ctx context.Context, cfg Config) (*Engine, error) {
	if cfg.URL == "" {
		return nil, errors.New("postgres: Config.URL is required")
	}
	cfg.setDefaults()
	pcfg, err := pgxpool.ParseConfig(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("database URL %s: %w", RedactURL(cfg.URL), err)
	}
	pcfg.MaxConns = cfg.MaxConns
	if cfg.ApplicationName == "" {
		schema := cfg.Schema
		if schema == "" {
			schema = pcfg.ConnConfig.RuntimeParams["search_path"]
		}
		cfg.ApplicationName = serverApplicationName(schema)
	}
	pcfg.ConnConfig.RuntimeParams["application_name"] = cfg.ApplicationName
	if cfg.Schema != "" {
		pcfg.ConnConfig.RuntimeParams["search_path"] = cfg.Schema
	}
	if _, set := pcfg.ConnConfig.RuntimeParams["jit"]; !set {
		// The engine's statements are short: compiling one takes longer
		// than running it, and a plan that a planner method turned off
		// weighs as much as the costliest query (plan.go).
		pcfg.ConnConfig.RuntimeParams["jit"] = "off"
	}
	e := &Engine{cfg: cfg, log: cfg.Logger, note: cfg.Notifier}
	pcfg.MinConns = pcfg.MaxConns // opened and warmed before serving (warm.go)
	pcfg.AfterConnect = e.warmNewConn
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", RedactURL(cfg.URL), err)
	}
	e.pool = pool
	e.hints.init()
	e.cluster.init("")
	if err := e.open(ctx); err != nil {
		e.events.stop()
		pool.Close()
		return nil, err
	}
	go e.runHeartbeat()
	return e, nil
}

func (e *Engine) open(ctx context.Context) error {
	if err := pingDatabase(ctx, e.pool); err != nil {
		return fmt.Errorf("connect to %s: %w", RedactURL(e.cfg.URL), err)
	}
	if e.cfg.Schema != "" {
		if _, err := e.pool.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+pgx.Identifier{e.cfg.Schema}.Sanitize()); err != nil {
			return fmt.Errorf("create schema %s: %w", e.cfg.Schema, err)
		}
	}
	if err := migrate(ctx, e.pool, e.log); err != nil {
		return err
	}
	// Warmed before the node joins: a leader's term must not lapse while
	// its connections warm, before its first heartbeat.
	if err := e.warmPool(ctx); err != nil {
		return err
	}
	var schema string
	if err := e.pool.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		return fmt.Errorf("read the schema: %w", err)
	}
	e.events.init(e, schema)
	if err := e.events.start(ctx); err != nil {
		return fmt.Errorf("listen for the other nodes: %w", err)
	}
	if err := e.join(ctx); err != nil {
		return err
	}
	if leading, _ := e.Leading(); leading {
		if err := e.sweepAtOpen(ctx); err != nil {
			return err
		}
	}
	return e.loadHints(ctx)
}

// pingDatabase checks that the database answers, within a bound.
func pingDatabase(ctx context.Context, pool *pgxpool.Pool) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return pool.Ping(ctx)
}

// Close leaves the nodes (so that the tasks this node's sessions still
// hold go back without waiting for its liveness to lapse) and closes the
// pool. It is idempotent.
func (e *Engine) Close() error {
	e.closeOnce.Do(func() {
		e.stopHeartbeat()
		ctx, cancel := context.WithTimeout(context.Background(), leaveTimeout)
		if err := e.leave(ctx); err != nil {
			e.log.Warn("leave the nodes: the tasks this node held go back once its liveness lapsed", "err", err)
		}
		cancel()
		e.events.stop()
		e.mu.Lock()
		e.closed = true
		e.stopRechecksLocked()
		e.mu.Unlock()
		e.pool.Close()
		e.resyncs.Wait()
	})
	return nil
}

// leaveTimeout bounds leaving the nodes on Close.
const leaveTimeout = 5 * time.Second

// Info describes the engine; see broker.Broker.
func (e *Engine) Info(ctx context.Context) (broker.Info, error) {
	if err := e.checkOpen(); err != nil {
		return broker.Info{}, err
	}
	info := broker.Info{Engine: "postgres", DataPath: RedactURL(e.cfg.URL)}
	e.mu.Lock()
	for _, q := range e.hints.queues {
		for s, n := range q.counts {
			info.Counts[s] += n
		}
	}
	e.mu.Unlock()
	return info, nil
}

func (e *Engine) checkOpen() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return errClosed
	}
	return nil
}

// inTx runs fn in a transaction, and again from the start when the
// database answers that it could not serialize it (a deadlock, a
// serialization failure): fn must be safe to run twice. What fn records in
// its txn for after the commit (hint changes, signals) is applied once it
// committed.
func (e *Engine) inTx(ctx context.Context, fn func(t *txn) error) error {
	if err := e.checkOpen(); err != nil {
		return err
	}
	for attempt := 1; ; attempt++ {
		t, err := e.begin(ctx)
		if err != nil {
			return e.storageError(err)
		}
		err = fn(t)
		if err == nil {
			err = t.flush(ctx)
		}
		if err == nil {
			err = e.commit(ctx, t)
		} else {
			_ = t.tx.Rollback(context.WithoutCancel(ctx))
		}
		if err != nil {
			e.giveBack(t)
		}
		if err != nil && retryable(err) && attempt < maxTxAttempts {
			continue
		}
		if err != nil {
			return e.storageError(err)
		}
		for _, fn := range t.after {
			fn()
		}
		return nil
	}
}

// commit commits t and applies what it did to the hints, sharing
// e.commits with every other commit. The commit runs to its end even when
// the caller gives up meanwhile: a commit cut short leaves its outcome
// unknown (a lease granted that nobody learns of, and nobody releases).
// When the outcome is lost anyway (the connection failed under it), the
// hints are marked stale, to be read again from the database.
func (e *Engine) commit(ctx context.Context, t *txn) error {
	e.capFloorsAhead(t)
	e.commits.RLock()
	err := t.tx.Commit(context.WithoutCancel(ctx))
	if err == nil {
		e.health.ok()
		e.applyCommitted(t)
	}
	e.commits.RUnlock()
	if err != nil && commitOutcomeUnknown(err) {
		e.hintsStale.Store(true)
	}
	if err == nil && e.hintsStale.Load() {
		e.startResync()
	}
	return err
}

// maxTxAttempts bounds how often inTx runs a transaction the database
// could not serialize.
const maxTxAttempts = 20

func (e *Engine) begin(ctx context.Context) (*txn, error) {
	tx, err := beginPiped(ctx, e.pool)
	if err != nil {
		return nil, err
	}
	return newTxn(e, tx), nil
}

// retryable reports whether err is the database refusing a transaction it
// could not order with another one: running it again succeeds.
func retryable(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "40001", "40P01": // serialization_failure, deadlock_detected
			return true
		}
	}
	return false
}

// storageError wraps an error of the database for the caller (a closed
// pool is ErrClosed); any other error (the contract's sentinels, a
// caller's own, a context's) passes as it is.
func (e *Engine) storageError(err error) error {
	var pe *pgconn.PgError
	switch {
	case err == nil:
		return nil
	case e.isClosed():
		return errClosed
	case isConnError(err) || pgconn.SafeToRetry(err) || pgconn.Timeout(err) || errors.As(err, &pe) && unavailableClass(pe.Code):
		e.health.failed(err)
		return fmt.Errorf("postgres: %w: %w", broker.ErrUnavailable, err)
	case errors.As(err, &pe):
		return fmt.Errorf("postgres: %w", err)
	}
	return err
}

// unavailableClass reports whether a PostgreSQL error code says the
// database cannot serve now (shutting down, starting, out of connections)
// rather than that the statement was wrong: class 08 (connection
// exception), 57P01-57P03 (admin shutdown, crash shutdown, cannot connect
// now), 53300 (too many connections).
func unavailableClass(code string) bool {
	return strings.HasPrefix(code, "08") || code == "57P01" || code == "57P02" || code == "57P03" || code == "53300"
}

// isConnError reports whether err is the connection to the database
// failing. A socket's own error (a reset, a broken pipe: the database
// killed or restarted under a statement) reaches the caller unwrapped.
func isConnError(err error) bool {
	var ce *pgconn.ConnectError
	var oe *net.OpError
	return errors.As(err, &ce) || errors.As(err, &oe) || errors.Is(err, pgx.ErrTxClosed) || errors.Is(err, pgconn.ErrConnClosed) ||
		errors.Is(err, net.ErrClosed) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)
}

func (e *Engine) isClosed() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.closed
}

var (
	_ broker.Broker         = (*Engine)(nil)
	_ broker.StorageHealth  = (*Engine)(nil)
	_ broker.DatabaseStater = (*Engine)(nil)
)
