package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/conveyor-dev/conveyor/broker"
)

// This file opens a database for conveyor copy (broker.CopySource and
// broker.CopyTarget): copyout.go reads one whole, copyin.go loads one.
//
// A copy works on one connection, named CopyApplicationName, under an
// advisory lock of its schema (so that two copies do not meet), and
// refuses a database a server is connected to: the engine names its
// connections ServerApplicationName (Config.ApplicationName). A source is
// read in one REPEATABLE READ transaction, one snapshot; a destination is
// loaded, its derived rows built and checked in one transaction, so that a
// copy that fails or is interrupted leaves it as it was.

// The names the engine's and a copy's connections go by in
// pg_stat_activity.
const (
	// ServerApplicationName is the engine's (followed by its schema, when
	// Config.Schema is set): a copy refuses a database that shows one.
	ServerApplicationName = "conveyor server"
	// CopyApplicationName is conveyor copy's.
	CopyApplicationName = "conveyor copy"
)

// serverApplicationName is the name of the connections of an engine in
// schema (empty: the connection's search_path).
func serverApplicationName(schema string) string {
	if schema == "" {
		return ServerApplicationName
	}
	return ServerApplicationName + " " + schema
}

// copyLock is the advisory lock a copy holds on its schema.
const copyLock = `hashtextextended('conveyor copy ' || current_schema(), 0)`

// CopyStore is a database opened for a copy; see OpenCopySource and
// OpenCopyTarget.
type CopyStore struct {
	url  string // redacted
	pool *pgxpool.Pool
	conn *pgxpool.Conn
	tx   pgx.Tx
	// target is set on a destination; seq numbers the tasks that come
	// without an order of their source's (CopyTask.Seq 0).
	target    bool
	seq       int64
	committed bool
}

var (
	_ broker.CopySource = (*CopyStore)(nil)
	_ broker.CopyTarget = (*CopyStore)(nil)
)

// OpenCopySource opens the database at url (in schema, when not empty) to
// copy what it holds. Its schema must be this binary's (conveyor migrate
// brings an older one up); no server may be connected to it
// (broker.ErrStoreInUse).
func OpenCopySource(ctx context.Context, url, schema string) (*CopyStore, error) {
	s, err := openCopy(ctx, url, schema)
	if err != nil {
		return nil, err
	}
	if err := s.openSource(ctx); err != nil {
		_ = s.Close()
		return nil, err
	}
	return s, nil
}

// OpenCopyTarget opens the database at url (in schema, when not empty,
// created if missing) as a copy's destination, migrating its schema. It
// must be empty, holding no task, queue or cron entry
// (broker.ErrStoreNotEmpty, saying what it holds), and no server may be
// connected to it (broker.ErrStoreInUse).
func OpenCopyTarget(ctx context.Context, url, schema string) (*CopyStore, error) {
	s, err := openCopy(ctx, url, schema)
	if err != nil {
		return nil, err
	}
	s.target = true
	if err := s.openTarget(ctx, schema); err != nil {
		_ = s.Close()
		return nil, err
	}
	return s, nil
}

// openCopy connects, as CopyApplicationName.
func openCopy(ctx context.Context, url, schema string) (*CopyStore, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("database URL %s: %w", RedactURL(url), err)
	}
	cfg.MaxConns = 2 // the copy's, and the migrations' own
	cfg.ConnConfig.RuntimeParams["application_name"] = CopyApplicationName
	if schema != "" {
		cfg.ConnConfig.RuntimeParams["search_path"] = schema
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err == nil {
		if err = pingDatabase(ctx, pool); err != nil {
			pool.Close()
		}
	}
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", RedactURL(url), err)
	}
	return &CopyStore{url: RedactURL(url), pool: pool}, nil
}

func (s *CopyStore) openSource(ctx context.Context) error {
	known, err := Migrations()
	if err != nil {
		return err
	}
	applied, err := appliedVersions(ctx, s.pool)
	if err != nil {
		return err
	}
	switch n := len(applied); {
	case n == 0:
		return fmt.Errorf("%s holds no Conveyor tables: nothing to copy", s.url)
	case applied[n-1] > len(known):
		return fmt.Errorf("%s: %w: it is at version %d and this binary knows %d", s.url, ErrSchemaTooNew, applied[n-1], len(known))
	case n < len(known):
		return fmt.Errorf("%s is at schema version %d and this binary's is %d: run conveyor migrate on it first", s.url, applied[n-1], len(known))
	}
	if err := s.lockStore(ctx); err != nil {
		return err
	}
	s.tx, err = s.conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	return err
}

func (s *CopyStore) openTarget(ctx context.Context, schema string) error {
	if schema != "" {
		if _, err := s.pool.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+pgx.Identifier{schema}.Sanitize()); err != nil {
			return fmt.Errorf("create schema %s: %w", schema, err)
		}
	}
	if _, err := applyMigrations(ctx, s.pool, slog.New(slog.DiscardHandler)); err != nil {
		return err
	}
	if err := s.lockStore(ctx); err != nil {
		return err
	}
	if err := s.checkEmpty(ctx); err != nil {
		return err
	}
	var err error
	if s.tx, err = s.conn.Begin(ctx); err != nil {
		return err
	}
	// What no task of an empty store needs: left by tasks deleted before.
	for _, table := range []string{"conveyor_deps", "conveyor_unique", "conveyor_ckeys", "conveyor_groups"} {
		if _, err := s.tx.Exec(ctx, "DELETE FROM "+table); err != nil {
			return fmt.Errorf("empty %s: %w", table, err)
		}
	}
	return nil
}

// lockStore takes the copy's connection and its advisory lock, and
// refuses a database a server (or another copy) is connected to.
func (s *CopyStore) lockStore(ctx context.Context) error {
	var err error
	if s.conn, err = s.pool.Acquire(ctx); err != nil {
		return err
	}
	var locked bool
	if err := s.conn.QueryRow(ctx, "SELECT pg_try_advisory_lock("+copyLock+")").Scan(&locked); err != nil {
		return fmt.Errorf("take the copy's lock: %w", err)
	}
	if !locked {
		return fmt.Errorf("%s: %w by another conveyor copy: wait for it to end", s.url, broker.ErrStoreInUse)
	}
	rows, err := s.conn.Query(ctx, `SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid()
			AND application_name IN ($1, $1 || ' ' || current_schema())`, ServerApplicationName)
	if err != nil {
		return err
	}
	n, err := pgx.CollectExactlyOneRow(rows, pgx.RowTo[int64])
	if err != nil {
		return err
	}
	if n > 0 {
		return fmt.Errorf("%s: %w: a server has %d connections to it (application_name %q): stop every server first",
			s.url, broker.ErrStoreInUse, n, ServerApplicationName)
	}
	return nil
}

// checkEmpty refuses a destination that holds tasks, queues or cron
// entries, saying how many.
func (s *CopyStore) checkEmpty(ctx context.Context) error {
	var tasks, queues, crons int64
	err := s.conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM conveyor_tasks),
		(SELECT count(*) FROM (SELECT name FROM conveyor_queues UNION SELECT queue FROM conveyor_queue_totals) q),
		(SELECT count(*) FROM conveyor_crons)`).Scan(&tasks, &queues, &crons)
	if err != nil {
		return err
	}
	if tasks+queues+crons == 0 {
		return nil
	}
	var parts []string
	for _, c := range []struct {
		n         int64
		one, many string
	}{{tasks, "task", "tasks"}, {queues, "queue", "queues"}, {crons, "cron entry", "cron entries"}} {
		if c.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", c.n, plural(c.n, c.one, c.many)))
		}
	}
	what := strings.Join(parts, ", ")
	if i := strings.LastIndex(what, ", "); i >= 0 {
		what = what[:i] + " and " + what[i+2:]
	}
	return fmt.Errorf("%w: %s holds %s: copy into an empty database (or schema)", broker.ErrStoreNotEmpty, s.url, what)
}

// Commit commits the load, and updates the planner's statistics of the
// tables it filled.
func (s *CopyStore) Commit(ctx context.Context) error {
	if !s.target || s.tx == nil {
		return errors.New("postgres: Commit of a store not opened as a copy's destination")
	}
	if err := s.tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit the copy: %w", err)
	}
	s.tx, s.committed = nil, true
	if _, err := s.conn.Exec(ctx, `ANALYZE conveyor_tasks, conveyor_deps, conveyor_groups, conveyor_unique, conveyor_ckeys`); err != nil {
		return fmt.Errorf("analyze the copied tables: %w", err)
	}
	return nil
}

// Close ends the copy's transaction (a load not committed is rolled
// back), releases its lock and disconnects.
func (s *CopyStore) Close() error {
	if s.pool == nil {
		return nil
	}
	ctx := context.Background()
	var err error
	if s.tx != nil {
		err = s.tx.Rollback(ctx)
		s.tx = nil
	}
	if s.conn != nil {
		// Closing the connection ends its session, and with it the lock.
		err = errors.Join(err, s.conn.Conn().Close(ctx))
		s.conn.Release()
		s.conn = nil
	}
	s.pool.Close()
	s.pool = nil
	return err
}

// SameDatabase reports whether two database URLs name one database and
// schema search path (the same host, port, database and search_path): a
// copy between them would read what it writes. URLs that do not parse are
// not the same.
func SameDatabase(a, b string) bool {
	ca, errA := pgconn.ParseConfig(a)
	cb, errB := pgconn.ParseConfig(b)
	if errA != nil || errB != nil {
		return false
	}
	return strings.EqualFold(ca.Host, cb.Host) && ca.Port == cb.Port && ca.Database == cb.Database &&
		ca.RuntimeParams["search_path"] == cb.RuntimeParams["search_path"]
}
