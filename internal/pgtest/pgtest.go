// Package pgtest gives tests a PostgreSQL database to run on: the one
// CONVEYOR_TEST_DATABASE_URL names (.ci/run and `make pg` start one), with
// a schema of their own so that they run in parallel.
package pgtest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvURL is the variable that names the test database.
const EnvURL = "CONVEYOR_TEST_DATABASE_URL"

// URL returns the test database's URL, and fails the test (it does not skip
// it) when none is set, saying how to start one.
func URL(t testing.TB) string {
	t.Helper()
	url := os.Getenv(EnvURL)
	if url == "" {
		t.Fatalf("%s is not set: the PostgreSQL engine's tests need a database. "+
			"Start a throwaway one with `eval \"$(make -s pg)\"` (Debian's postgresql package; see the README), "+
			"or point %s at a postgres:// URL whose user may CREATE SCHEMA", EnvURL, EnvURL)
	}
	return url
}

// Schema returns a schema name for the store a test uses (the same store
// always gets the same schema, so a test can reopen it), and drops the
// schema when the test ends.
func Schema(t testing.TB, store string) string {
	t.Helper()
	sum := sha256.Sum256([]byte(store))
	name := "t_" + hex.EncodeToString(sum[:10])
	url := URL(t)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Errorf("drop schema %s: %v", name, err)
			return
		}
		defer func() { _ = conn.Close(ctx) }()
		if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{name}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", name, err)
		}
	})
	return name
}
