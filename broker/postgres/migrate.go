package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The schema is a series of migrations, embedded in the binary and
// numbered from 1 (migrations/NNNN_name.sql). A database records those it
// applied in conveyor_migrations; a server applies the rest on start, all
// under one advisory lock, so that nodes starting together apply each once.

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Migration is one step of the schema.
type Migration struct {
	Version int
	Name    string
	sql     string
}

// migrationLock is the advisory lock the migrations of the connection's
// schema are applied under: schemas of one database migrate apart.
const migrationLock = `hashtextextended('conveyor migrations ' || current_schema(), 0)`

// Migrations lists the schema's steps, in order.
func Migrations() ([]Migration, error) {
	entries, err := fs.ReadDir(migrationFiles, "migrations")
	if err != nil {
		return nil, err
	}
	var out []Migration
	for _, ent := range entries {
		name := ent.Name()
		num, rest, ok := strings.Cut(strings.TrimSuffix(name, ".sql"), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil {
			return nil, fmt.Errorf("migration file %s: want NNNN_name.sql", name)
		}
		body, err := migrationFiles.ReadFile(path.Join("migrations", name))
		if err != nil {
			return nil, err
		}
		out = append(out, Migration{Version: v, Name: rest, sql: string(body)})
	}
	slices.SortFunc(out, func(a, b Migration) int { return a.Version - b.Version })
	for i, m := range out {
		if m.Version != i+1 {
			return nil, fmt.Errorf("migration %d (%s) is out of sequence: want %d", m.Version, m.Name, i+1)
		}
	}
	return out, nil
}

// SchemaVersion is the newest schema this binary knows.
func SchemaVersion() int {
	ms, err := Migrations()
	if err != nil || len(ms) == 0 {
		return 0
	}
	return ms[len(ms)-1].Version
}

// ErrSchemaTooNew means the database was migrated by a newer Conveyor than
// this one: running on it could misread what that version wrote.
var ErrSchemaTooNew = errors.New("the database's schema is newer than this binary")

// MigrationStatus is where a database stands: the versions it applied.
type MigrationStatus struct {
	Applied []int
	Known   []Migration
}

// Pending lists the known migrations the database has not applied.
func (s MigrationStatus) Pending() []Migration {
	var out []Migration
	for _, m := range s.Known {
		if !slices.Contains(s.Applied, m.Version) {
			out = append(out, m)
		}
	}
	return out
}

// Status reads which migrations the database at url (in schema, when not
// empty) applied, without changing anything.
func Status(ctx context.Context, url, schema string) (MigrationStatus, error) {
	known, err := Migrations()
	if err != nil {
		return MigrationStatus{}, err
	}
	pool, err := connect(ctx, url, schema)
	if err != nil {
		return MigrationStatus{}, err
	}
	defer pool.Close()
	applied, err := appliedVersions(ctx, pool)
	return MigrationStatus{Applied: applied, Known: known}, err
}

// Migrate applies the migrations the database at url lacks and returns
// those it applied.
func Migrate(ctx context.Context, url, schema string, log *slog.Logger) ([]Migration, error) {
	pool, err := connect(ctx, url, schema)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	if schema != "" {
		if _, err := pool.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+pgx.Identifier{schema}.Sanitize()); err != nil {
			return nil, fmt.Errorf("create schema %s: %w", schema, err)
		}
	}
	return applyMigrations(ctx, pool, log)
}

func connect(ctx context.Context, url, schema string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("database URL %s: %w", RedactURL(url), err)
	}
	cfg.MaxConns = 2
	if schema != "" {
		cfg.ConnConfig.RuntimeParams["search_path"] = schema
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err == nil {
		err = pingDatabase(ctx, pool)
		if err != nil {
			pool.Close()
		}
	}
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", RedactURL(url), err)
	}
	return pool, nil
}

// migrate applies what the database lacks, for Open.
func migrate(ctx context.Context, pool *pgxpool.Pool, log *slog.Logger) error {
	_, err := applyMigrations(ctx, pool, log)
	return err
}

// checkEncoding refuses a database whose encoding is not UTF8: Conveyor's
// text is UTF-8, which another encoding would refuse (or, SQL_ASCII,
// store unchecked) task by task, long after the server started.
func checkEncoding(ctx context.Context, conn *pgxpool.Conn) error {
	var enc string
	if err := conn.QueryRow(ctx, "SELECT current_setting('server_encoding')").Scan(&enc); err != nil {
		return fmt.Errorf("read the database's encoding: %w", err)
	}
	if enc != "UTF8" {
		return fmt.Errorf("the database's encoding is %s: Conveyor stores UTF-8 text and needs a database made with ENCODING 'UTF8'", enc)
	}
	return nil
}

func applyMigrations(ctx context.Context, pool *pgxpool.Pool, log *slog.Logger) ([]Migration, error) {
	known, err := Migrations()
	if err != nil {
		return nil, err
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Release()
	if err := checkEncoding(ctx, conn); err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock("+migrationLock+")"); err != nil {
		return nil, fmt.Errorf("take the migration lock: %w", err)
	}
	defer func() { _, _ = conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock("+migrationLock+")") }()
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS conveyor_migrations (
		version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return nil, fmt.Errorf("create conveyor_migrations: %w", err)
	}
	applied, err := appliedVersions(ctx, conn)
	if err != nil {
		return nil, err
	}
	if n := len(applied); n > 0 && applied[n-1] > len(known) {
		return nil, fmt.Errorf("%w: it is at version %d and this binary knows %d; run a Conveyor at least as new as the one that migrated it",
			ErrSchemaTooNew, applied[n-1], len(known))
	}
	var done []Migration
	for _, m := range known {
		if slices.Contains(applied, m.Version) {
			continue
		}
		if err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, m.sql); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "INSERT INTO conveyor_migrations (version, name) VALUES ($1, $2)", m.Version, m.Name)
			return err
		}); err != nil {
			return done, fmt.Errorf("migration %d (%s): %w", m.Version, m.Name, err)
		}
		log.Info("applied a schema migration", "version", m.Version, "name", m.Name)
		done = append(done, m)
	}
	return done, nil
}

// querier runs a query: a pool, a connection or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

func appliedVersions(ctx context.Context, q querier) ([]int, error) {
	rows, err := q.Query(ctx, `SELECT version FROM conveyor_migrations ORDER BY version`)
	if err != nil {
		if isUndefinedTable(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("read conveyor_migrations: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowTo[int])
}
