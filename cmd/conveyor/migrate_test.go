package main

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/conveyor-dev/conveyor/internal/pgtest"
)

// schemaURL is the test database's URL with search_path set to a schema of
// t's own, created for it.
func schemaURL(t *testing.T) string {
	t.Helper()
	url := pgtest.URL(t)
	schema := pgtest.Schema(t, t.TempDir())
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(context.Background()) }()
	if _, err := conn.Exec(context.Background(), "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	return url + sep + "search_path=" + schema
}

// TestMigrate: --status lists the migrations pending, migrate applies
// them once, and --status then shows them applied.
func TestMigrate(t *testing.T) {
	t.Parallel()
	url := schemaURL(t)
	if out := mustRun(t, "migrate", "--database-url", url, "--status"); !strings.Contains(out, "0001_tasks") || !strings.Contains(out, "pending") {
		t.Fatalf("migrate --status of an empty database:\n%s", out)
	}
	if out := mustRun(t, "migrate", "--database-url", url); !strings.Contains(out, "applied 0001_tasks") {
		t.Fatalf("migrate:\n%s", out)
	}
	if out := mustRun(t, "migrate", "--database-url", url); !strings.Contains(out, "nothing to apply") {
		t.Fatalf("migrate again:\n%s", out)
	}
	if out := mustRun(t, "migrate", "--database-url", url, "--status"); strings.Contains(out, "pending") || !strings.Contains(out, "applied") {
		t.Fatalf("migrate --status after migrating:\n%s", out)
	}
}

// TestMigrateRefusesANewerSchema: a database migrated by a newer Conveyor
// is refused, saying so.
func TestMigrateRefusesANewerSchema(t *testing.T) {
	t.Parallel()
	url := schemaURL(t)
	mustRun(t, "migrate", "--database-url", url)
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(context.Background()) }()
	if _, err := conn.Exec(context.Background(), "INSERT INTO conveyor_migrations (version, name) VALUES (999, 'future')"); err != nil {
		t.Fatal(err)
	}
	_, err = runCLI(t, "", "migrate", "--database-url", url)
	if err == nil || !strings.Contains(err.Error(), "newer than this binary") || !strings.Contains(err.Error(), "999") {
		t.Fatalf("migrate of a newer schema: %v, want a refusal naming it", err)
	}
}

// TestMigrateRedactsThePassword: an unreachable database is named in the
// error without its password.
func TestMigrateRedactsThePassword(t *testing.T) {
	t.Parallel()
	_, err := runCLI(t, "", "migrate", "--database-url", "postgres://u:s3cret@127.0.0.1:1/db?sslmode=disable")
	if err == nil || strings.Contains(err.Error(), "s3cret") || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Fatalf("migrate of an unreachable database: %v; want an error naming it, password redacted", err)
	}
}

// TestMigrateRefusesADatabaseNotInUTF8: a database of another encoding is
// refused before anything is made in it, naming its encoding.
func TestMigrateRefusesADatabaseNotInUTF8(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.URL(t)
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(ctx) }()
	name := pgx.Identifier{"latin1_" + strconv.FormatInt(time.Now().UnixNano(), 36)}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name.Sanitize()+" ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = conn.Exec(context.Background(), "DROP DATABASE "+name.Sanitize()) })
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	latin := strings.Replace(url, "/"+cfg.Database+"?", "/"+name[0]+"?", 1)
	if !strings.Contains(latin, name[0]) {
		t.Fatalf("cannot name the database %s in %s", name[0], url)
	}
	_, err = runCLI(t, "", "migrate", "--database-url", latin)
	if err == nil || !strings.Contains(err.Error(), "LATIN1") || !strings.Contains(err.Error(), "UTF8") {
		t.Fatalf("migrate of a LATIN1 database: %v, want a refusal naming its encoding", err)
	}
	var tables int
	lc, err := pgx.Connect(ctx, latin)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lc.Close(ctx) }()
	if err := lc.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE tablename LIKE 'conveyor_%'").Scan(&tables); err != nil || tables != 0 {
		t.Fatalf("the refused database holds %d conveyor tables (%v), want none", tables, err)
	}
}
