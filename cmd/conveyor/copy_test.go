package main

import (
	"context"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	bbolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"

	"github.com/conveyor-dev/conveyor/broker"
	"github.com/conveyor-dev/conveyor/broker/bolt"
	bt "github.com/conveyor-dev/conveyor/broker/brokertest"
	"github.com/conveyor-dev/conveyor/broker/postgres"
	storagev1 "github.com/conveyor-dev/conveyor/gen/conveyor/storage/v1"
	"github.com/conveyor-dev/conveyor/internal/pgtest"
	"github.com/conveyor-dev/conveyor/server"
)

// copyStore is a store a copy test fills or checks: arg names it on the
// command line, open opens an engine on it.
type copyStore struct {
	arg  string
	open func(t *testing.T) broker.Broker
}

// copyEngine makes fresh stores of one engine.
type copyEngine struct {
	name     string
	newStore func(t *testing.T, name string) copyStore
}

var copyEngines = []copyEngine{
	{"Bolt", func(t *testing.T, _ string) copyStore {
		dir := filepath.Join(t.TempDir(), "data")
		return copyStore{arg: dir, open: func(t *testing.T) broker.Broker {
			e, err := bolt.Open(bolt.Config{Path: filepath.Join(dir, server.DataFile)})
			if err != nil {
				t.Fatalf("open the bbolt store: %v", err)
			}
			t.Cleanup(func() { _ = e.Close() })
			return e
		}}
	}},
	{"Postgres", func(t *testing.T, name string) copyStore {
		schema := pgtest.Schema(t, t.Name()+"/"+name)
		createSchema(t, schema)
		return copyStore{arg: searchPathURL(t, schema), open: func(t *testing.T) broker.Broker {
			e, err := postgres.Open(t.Context(), postgres.Config{URL: pgtest.URL(t), Schema: schema})
			if err != nil {
				t.Fatalf("open the PostgreSQL store: %v", err)
			}
			t.Cleanup(func() { _ = e.Close() })
			return e
		}}
	}},
}

// createSchema creates a test's schema, for a copy to migrate into (the
// URL names it as the search path).
func createSchema(t *testing.T, schema string) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(context.Background()) }()
	if _, err := conn.Exec(t.Context(), "CREATE SCHEMA IF NOT EXISTS "+pgx.Identifier{schema}.Sanitize()); err != nil {
		t.Fatal(err)
	}
}

// searchPathURL is the test database's URL with schema as its search path.
func searchPathURL(t *testing.T, schema string) string {
	t.Helper()
	u, err := url.Parse(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// TestCopyBetweenEngines: conveyor copy moves a store holding a task in
// every state, queues with configuration and totals, cron entries with
// history, and the queues' history, from each engine to each; the engine
// opened on the copy holds the same and behaves as the source would have
// after a restart.
func TestCopyBetweenEngines(t *testing.T) {
	t.Parallel()
	for _, from := range copyEngines {
		for _, to := range copyEngines {
			t.Run(from.name+"To"+to.name, func(t *testing.T) {
				t.Parallel()
				src := from.newStore(t, "src")
				b := src.open(t)
				f := bt.PopulateCopy(t, b)
				if err := b.Close(); err != nil {
					t.Fatal(err)
				}
				dst := to.newStore(t, "dst")
				out, stderr, err := runCLIFull(t, "", "copy", "--from", src.arg, "--to", dst.arg)
				if err != nil {
					t.Fatalf("copy: %v\n%s", err, stderr)
				}
				for _, want := range []string{"copied 28 tasks, 9 queues and 3 cron entries", "verified:", "queue history: 6 samples",
					"3 tasks were ACTIVE", "\nactive       3\n", "\ntotal        28\n"} {
					if !strings.Contains(out, want) {
						t.Errorf("the summary does not say %q:\n%s", want, out)
					}
				}
				if !strings.Contains(stderr, "copy: 28/28 tasks") {
					t.Errorf("no progress line on standard error: %q", stderr)
				}
				f.Check(t, dst.open(t))
			})
		}
	}
}

// populated is a store of engine holding one task, its engine closed.
func populated(t *testing.T, engine copyEngine, name string) copyStore {
	t.Helper()
	s := engine.newStore(t, name)
	b := s.open(t)
	bt.EnqueueOne(t, b, bt.T0, bt.NewTask("q"))
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestCopyRefusesANonEmptyDestination: a destination that holds a task is
// refused, saying what it holds, and left as it was.
func TestCopyRefusesANonEmptyDestination(t *testing.T) {
	t.Parallel()
	for _, engine := range copyEngines {
		t.Run(engine.name, func(t *testing.T) {
			t.Parallel()
			src := populated(t, engine, "src")
			dst := populated(t, engine, "dst")
			_, err := runCLI(t, "", "copy", "--from", src.arg, "--to", dst.arg)
			if !errors.Is(err, broker.ErrStoreNotEmpty) || !strings.Contains(err.Error(), "holds 1 task and 1 queue") {
				t.Fatalf("copy into a store holding a task: %v, want ErrStoreNotEmpty saying what it holds", err)
			}
			b := dst.open(t)
			if q := bt.Queue(t, b, "q"); q.Counts[broker.StatePending] != 1 || q.Enqueued != 1 {
				t.Errorf("the refused destination changed: %+v", q)
			}
		})
	}
}

// TestCopyRefusesARunningServer: a store an engine has open (a running
// server), as the source or as the destination, is refused, and the copy
// changes nothing.
func TestCopyRefusesARunningServer(t *testing.T) {
	t.Parallel()
	for _, engine := range copyEngines {
		t.Run(engine.name, func(t *testing.T) {
			t.Parallel()
			src := populated(t, engine, "src")
			dst := engine.newStore(t, "dst")
			b := src.open(t) // the server runs on the source
			_, err := runCLI(t, "", "copy", "--from", src.arg, "--to", dst.arg)
			if !errors.Is(err, broker.ErrStoreInUse) || !strings.Contains(err.Error(), "stop") {
				t.Fatalf("copy from a store a server has open: %v, want ErrStoreInUse", err)
			}
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			b = dst.open(t) // and now on the destination
			_, err = runCLI(t, "", "copy", "--from", src.arg, "--to", dst.arg)
			if !errors.Is(err, broker.ErrStoreInUse) {
				t.Fatalf("copy into a store a server has open: %v, want ErrStoreInUse", err)
			}
			if qs, err := b.Queues(t.Context()); err != nil || len(qs) != 0 {
				t.Errorf("the refused destination holds %+v (%v)", qs, err)
			}
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := runCLI(t, "", "copy", "--from", src.arg, "--to", dst.arg); err != nil {
				t.Fatalf("copy once both servers stopped: %v", err)
			}
		})
	}
}

// TestCopyRefusesTheSameStore: --from and --to naming one store is a
// usage error (the bbolt directory by another path, the database by the
// same URL), and nothing is read.
func TestCopyRefusesTheSameStore(t *testing.T) {
	t.Parallel()
	dir := populated(t, copyEngines[0], "src").arg
	pg := populated(t, copyEngines[1], "src").arg
	for _, pair := range [][2]string{{dir, dir + "/."}, {pg, pg}} {
		_, err := runCLI(t, "", "copy", "--from", pair[0], "--to", pair[1])
		if err == nil || exitCode(err) != exitUsage || !strings.Contains(err.Error(), "name the same store") {
			t.Errorf("copy from %s to %s: %v (exit %d), want a usage error", pair[0], pair[1], err, exitCode(err))
		}
	}
}

// TestCopyFailsLoudlyOnAMismatch: a source whose counts disagree with the
// tasks it holds (a queue record of the bbolt file saying 5 completed
// tasks where there is none) fails the copy, naming the queue and both
// counts, and the destination is left as it was: no data file.
func TestCopyFailsLoudlyOnAMismatch(t *testing.T) {
	t.Parallel()
	src := populated(t, copyEngines[0], "src")
	path := filepath.Join(src.arg, server.DataFile)
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		b := tx.Bucket([]byte("queues"))
		var rec storagev1.QueueRecord
		if err := proto.Unmarshal(b.Get([]byte("q")), &rec); err != nil {
			return err
		}
		rec.Completed = 5
		v, err := proto.Marshal(&rec)
		if err != nil {
			return err
		}
		return b.Put([]byte("q"), v)
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, engine := range copyEngines {
		dst := engine.newStore(t, "dst-"+engine.name)
		_, err := runCLI(t, "", "copy", "--from", src.arg, "--to", dst.arg)
		if err == nil || !strings.Contains(err.Error(), `queue "q": the source counts 1 pending, 5 completed, the copy read 1 pending`) ||
			!strings.Contains(err.Error(), "not committed") {
			t.Fatalf("copy of a source whose counts are wrong, to %s: %v, want a mismatch named", engine.name, err)
		}
		if engine.name == "Bolt" {
			if _, err := os.Stat(dst.arg); !errors.Is(err, os.ErrNotExist) {
				entries, _ := os.ReadDir(dst.arg)
				t.Errorf("the failed copy left %v in %s", entries, dst.arg)
			}
			continue
		}
		if qs, err := dst.open(t).Queues(t.Context()); err != nil || len(qs) != 0 {
			t.Errorf("the failed copy left %+v (%v)", qs, err)
		}
	}
}

// TestCopyInterrupted: a copy interrupted once its tasks are loaded (the
// signal's context ends) commits nothing: the destination of either engine
// holds nothing, and a copy into it afterwards runs.
func TestCopyInterrupted(t *testing.T) {
	t.Parallel()
	src := populated(t, copyEngines[0], "src")
	for _, engine := range copyEngines {
		t.Run(engine.name, func(t *testing.T) {
			t.Parallel()
			dst := engine.newStore(t, "dst")
			from, to := storeOf(src.arg), storeOf(dst.arg)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			s, err := from.openSource(ctx)
			if err != nil {
				t.Fatal(err)
			}
			d, err := to.openTarget(ctx)
			if err != nil {
				t.Fatal(err)
			}
			_, err = runCopy(ctx, s, d, func(int64, int64) { cancel() })
			if !errors.Is(err, context.Canceled) {
				t.Errorf("an interrupted copy: %v, want context.Canceled", err)
			}
			if err := errors.Join(s.Close(), d.Close()); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(filepath.Join(dst.arg, server.DataFile)); engine.name == "Bolt" && !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("an interrupted copy left a data file (%v)", err)
			}
			if _, err := runCLI(t, "", "copy", "--from", src.arg, "--to", dst.arg); err != nil {
				t.Fatalf("a copy after the interrupted one: %v", err)
			}
			if q := bt.Queue(t, dst.open(t), "q"); q.Counts[broker.StatePending] != 1 || q.Enqueued != 1 {
				t.Fatalf("the copy after the interrupted one holds %+v", q)
			}
		})
	}
}

// TestCopyNamesTextPostgresCannotStore: a task whose metadata holds a NUL
// character (the embedded engine stores it; PostgreSQL's text does not)
// fails a copy into PostgreSQL, naming the task and its field, and nothing
// is copied; a copy into bbolt keeps it.
func TestCopyNamesTextPostgresCannotStore(t *testing.T) {
	t.Parallel()
	src := copyEngines[0].newStore(t, "src")
	b := src.open(t)
	nt := bt.NewTask("q")
	nt.Metadata = map[string]string{"k": "a\x00b"}
	id := bt.EnqueueOne(t, b, bt.T0, nt).ID
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	dst := copyEngines[1].newStore(t, "dst")
	_, err := runCLI(t, "", "copy", "--from", src.arg, "--to", dst.arg)
	if err == nil || !strings.Contains(err.Error(), "task "+id+": its metadata") || !strings.Contains(err.Error(), "NUL") {
		t.Fatalf("copy of a task with a NUL in its metadata into PostgreSQL: %v, want the task and field named", err)
	}
	if qs, err := dst.open(t).Queues(t.Context()); err != nil || len(qs) != 0 {
		t.Errorf("the failed copy left %+v (%v)", qs, err)
	}
	dst = copyEngines[0].newStore(t, "dst")
	mustRun(t, "copy", "--from", src.arg, "--to", dst.arg)
	if got := bt.GetTask(t, dst.open(t), id); got.Metadata["k"] != "a\x00b" {
		t.Errorf("the copy into bbolt has metadata %q", got.Metadata)
	}
}

// TestCopyEmptyStore: the store of a server that never stored anything
// copies into either engine, as nothing.
func TestCopyEmptyStore(t *testing.T) {
	t.Parallel()
	for _, from := range copyEngines {
		src := from.newStore(t, "src")
		if err := src.open(t).Close(); err != nil {
			t.Fatal(err)
		}
		for _, to := range copyEngines {
			dst := to.newStore(t, "dst-"+from.name)
			out := mustRun(t, "copy", "--from", src.arg, "--to", dst.arg)
			if !strings.Contains(out, "copied 0 tasks, 0 queues and 0 cron entries") {
				t.Errorf("copy of an empty %s store into %s:\n%s", from.name, to.name, out)
			}
			if qs, err := dst.open(t).Queues(t.Context()); err != nil || len(qs) != 0 {
				t.Errorf("the copy of an empty store holds %+v (%v)", qs, err)
			}
		}
	}
}
