package main

import (
	"context"
	"strings"
	"testing"

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
