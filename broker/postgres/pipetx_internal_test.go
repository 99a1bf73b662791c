package postgres

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/conveyor-dev/conveyor/internal/pgtest"
)

// pipePool is a pool of one connection on a schema of the test's own,
// holding a table kv (k text primary key, v int).
func pipePool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	schema := pgtest.Schema(t, t.Name())
	cfg, err := pgxpool.ParseConfig(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if _, err := pool.Exec(t.Context(), "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(t.Context(), "CREATE TABLE kv (k text PRIMARY KEY, v int NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	return pool
}

// value reads k's value from a connection of its own (-1: no row).
func value(t *testing.T, pool *pgxpool.Pool, k string) int {
	t.Helper()
	v := -1
	err := pool.QueryRow(t.Context(), "SELECT v FROM kv WHERE k = $1", k).Scan(&v)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		t.Fatal(err)
	}
	return v
}

func begun(t *testing.T, pool *pgxpool.Pool) *pipeTx {
	t.Helper()
	tx, err := beginPiped(t.Context(), pool)
	if err != nil {
		t.Fatal(err)
	}
	return tx
}

// TestPipeTxIsATransaction: the statements of a pipeTx, the first sent
// with its BEGIN and the last with its COMMIT, see one another's writes,
// are seen by nobody else until the commit, and are all undone by a
// rollback; each way of sending a first statement opens the transaction.
func TestPipeTxIsATransaction(t *testing.T) {
	pool := pipePool(t)
	ctx := t.Context()
	first := map[string]func(tx *pipeTx) error{
		"Exec": func(tx *pipeTx) error {
			_, err := tx.Exec(ctx, "INSERT INTO kv VALUES ('a', 1)")
			return err
		},
		"Query": func(tx *pipeTx) error {
			rows, err := tx.Query(ctx, "INSERT INTO kv VALUES ('a', 1) RETURNING v")
			if err != nil {
				return err
			}
			rows.Close()
			return rows.Err()
		},
		"QueryRow": func(tx *pipeTx) error {
			var v int
			return tx.QueryRow(ctx, "INSERT INTO kv VALUES ('a', 1) RETURNING v").Scan(&v)
		},
		"SendBatch": func(tx *pipeTx) error {
			b := &pgx.Batch{}
			b.Queue("INSERT INTO kv VALUES ('a', 1)")
			return tx.SendBatch(ctx, b).Close()
		},
		"copyBinary": func(tx *pipeTx) error {
			buf := newCopyRowsBuf(64)
			buf.row(2)
			buf.text("a")
			buf.int4(1)
			return tx.copyBinary(ctx, "COPY kv (k, v) FROM STDIN (FORMAT binary)", buf.end())
		},
	}
	for name, write := range first {
		if _, err := pool.Exec(ctx, "DELETE FROM kv"); err != nil {
			t.Fatal(err)
		}
		// Rolled back: nothing stays.
		tx := begun(t, pool)
		if err := write(tx); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := tx.Rollback(ctx); err != nil {
			t.Fatalf("%s: Rollback: %v", name, err)
		}
		if v := value(t, pool, "a"); v != -1 {
			t.Fatalf("%s: a rolled-back write stayed (v = %d)", name, v)
		}
		// Committed, with a statement left for the commit.
		tx = begun(t, pool)
		if err := write(tx); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var v int
		if err := tx.QueryRow(ctx, "UPDATE kv SET v = v + 1 WHERE k = 'a' RETURNING v").Scan(&v); err != nil || v != 2 {
			t.Fatalf("%s: the transaction's second statement read v = %d, %v; want 2", name, v, err)
		}
		tx.atCommit("UPDATE kv SET v = v * 10 WHERE k = 'a'")
		if err := tx.Commit(ctx); err != nil {
			t.Fatalf("%s: Commit: %v", name, err)
		}
		if v := value(t, pool, "a"); v != 20 {
			t.Fatalf("%s: after the commit v = %d, want 20", name, v)
		}
	}
}

// TestPipeTxFailures: a statement that fails after the pipelined BEGIN,
// or one left for the commit that fails, leaves nothing of the
// transaction, reports its error, and gives the connection back clean.
func TestPipeTxFailures(t *testing.T) {
	pool := pipePool(t)
	ctx := t.Context()
	if _, err := pool.Exec(ctx, "INSERT INTO kv VALUES ('taken', 0)"); err != nil {
		t.Fatal(err)
	}
	var pe *pgconn.PgError

	tx := begun(t, pool)
	if _, err := tx.Exec(ctx, "INSERT INTO kv VALUES ('taken', 1)"); !errors.As(err, &pe) || pe.Code != "23505" {
		t.Fatalf("the first statement's unique violation: %v", err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatalf("Rollback after a failed first statement: %v", err)
	}

	tx = begun(t, pool)
	if _, err := tx.Exec(ctx, "INSERT INTO kv VALUES ('b', 1)"); err != nil {
		t.Fatal(err)
	}
	tx.atCommit("INSERT INTO kv VALUES ('taken', 2)")
	if err := tx.Commit(ctx); !errors.As(err, &pe) || pe.Code != "23505" {
		t.Fatalf("a commit whose last statement fails: %v, want its unique violation", err)
	}
	if err := tx.Commit(ctx); !errors.Is(err, errTxDone) {
		t.Fatalf("a second Commit: %v, want errTxDone", err)
	}
	if v := value(t, pool, "b"); v != -1 {
		t.Fatalf("the write before a failed commit stayed (v = %d)", v)
	}

	// The pool's one connection is back and usable, outside any transaction.
	tx = begun(t, pool)
	if _, err := tx.Exec(ctx, "INSERT INTO kv VALUES ('c', 1)"); err != nil {
		t.Fatalf("the connection after the failures: %v", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if v := value(t, pool, "c"); v != 1 {
		t.Fatalf("c = %d, want 1", v)
	}

	// A transaction that sent nothing commits without a round trip, and
	// QueryRow finding no row says so as pgx does.
	if err := begun(t, pool).Commit(ctx); err != nil {
		t.Fatalf("an empty transaction's Commit: %v", err)
	}
	tx = begun(t, pool)
	var v int
	if err := tx.QueryRow(ctx, "SELECT v FROM kv WHERE k = 'none'").Scan(&v); !errors.Is(err, pgx.ErrNoRows) {
		t.Fatalf("QueryRow of no row: %v, want pgx.ErrNoRows", err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestPipeTxSendsAhead: a statement queued with sendAhead goes out with
// the transaction's next statement, whether that one opens the transaction
// or not, and what it sets (SET LOCAL) holds in the transaction and ends
// with it; one that fails fails the statement it went out with.
func TestPipeTxSendsAhead(t *testing.T) {
	pool := pipePool(t)
	ctx := t.Context()
	setting := func(q interface {
		QueryRow(context.Context, string, ...any) pgx.Row
	}) string {
		t.Helper()
		var v string
		if err := q.QueryRow(ctx, "SHOW enable_sort").Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, begunFirst := range []bool{false, true} {
		tx := begun(t, pool)
		if begunFirst {
			if _, err := tx.Exec(ctx, "INSERT INTO kv VALUES ('a', 1)"); err != nil {
				t.Fatal(err)
			}
		}
		tx.sendAhead("SET LOCAL enable_sort = off")
		if v := setting(tx); v != "off" {
			t.Errorf("begun first %v: enable_sort is %q in the transaction, want off", begunFirst, v)
		}
		if err := tx.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
		if v := setting(pool); v != "on" {
			t.Errorf("begun first %v: enable_sort is %q after the transaction, want on", begunFirst, v)
		}
	}
	tx := begun(t, pool)
	tx.sendAhead("SET LOCAL no_such.setting TO")
	if _, err := tx.Exec(ctx, "INSERT INTO kv VALUES ('b', 1)"); err == nil {
		t.Error("a statement sent after a failing one ahead of it succeeded")
	}
	_ = tx.Rollback(ctx)
	if v := value(t, pool, "b"); v != -1 {
		t.Errorf("kv b = %d after the failed transaction, want no row", v)
	}
}

// TestPipeTxSendsAheadWithCommit: statements queued with sendAhead, with
// their arguments, and no statement after them go out with COMMIT, in
// the order queued, whether the transaction began or not; one that fails
// fails the commit and nothing of the transaction stays.
func TestPipeTxSendsAheadWithCommit(t *testing.T) {
	pool := pipePool(t)
	ctx := t.Context()
	for i, begunFirst := range []bool{false, true} {
		key := fmt.Sprintf("ahead%d", i)
		tx := begun(t, pool)
		if begunFirst {
			if _, err := tx.Exec(ctx, "INSERT INTO kv VALUES ($1, 1)", key+"x"); err != nil {
				t.Fatal(err)
			}
		}
		tx.sendAhead("INSERT INTO kv VALUES ($1, $2)", key, 7)
		tx.sendAhead("UPDATE kv SET v = v * $2 WHERE k = $1", key, 3)
		if err := tx.Commit(ctx); err != nil {
			t.Fatalf("begun first %v: commit: %v", begunFirst, err)
		}
		if v := value(t, pool, key); v != 21 {
			t.Errorf("begun first %v: kv %s = %d, want 21 (the insert, then the update)", begunFirst, key, v)
		}
	}
	tx := begun(t, pool)
	tx.sendAhead("INSERT INTO kv VALUES ($1, $2)", "aheadbad", 1)
	tx.sendAhead("INSERT INTO kv VALUES ($1, $2)", "aheadbad", 2) // the key is taken: fails
	if err := tx.Commit(ctx); err == nil {
		t.Error("a commit after a failing statement ahead of it succeeded")
	}
	if v := value(t, pool, "aheadbad"); v != -1 {
		t.Errorf("kv aheadbad = %d after the failed commit, want no row", v)
	}
}
