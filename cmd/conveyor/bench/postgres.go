package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"time"

	"github.com/jackc/pgx/v5"
)

// freshDatabase makes a schema of its own in the database at base for one
// run's server, and returns the URL that puts the server's tables there,
// and a function that drops the schema once the server stopped.
func freshDatabase(base string) (string, func(), error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "conveyor_bench_" + hex.EncodeToString(b[:])
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		return "", nil, fmt.Errorf("bench database: %w", err)
	}
	defer func() { _ = conn.Close(ctx) }()
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		return "", nil, fmt.Errorf("bench database: %w", err)
	}
	u, err := url.Parse(base)
	if err != nil {
		return "", nil, fmt.Errorf("bench database URL: %w", err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	drop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if conn, err := pgx.Connect(ctx, base); err == nil {
			_, _ = conn.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
			_ = conn.Close(ctx)
		}
	}
	return u.String(), drop, nil
}

// serverArgs are the engine flags of a run's fresh server, and what to do
// once it stopped: nothing for the embedded engine, a schema of its own
// for PostgreSQL.
func (r *runner) serverArgs() ([]string, func(), error) {
	var push []string
	if r.cfg.Push {
		push = []string{"--push-secret", r.cfg.PushSecret}
	}
	if r.cfg.DatabaseURL == "" {
		return push, func() {}, nil
	}
	u, drop, err := freshDatabase(r.cfg.DatabaseURL)
	if err != nil {
		return nil, nil, err
	}
	return append([]string{"--broker", "postgres", "--database-url", u}, push...), drop, nil
}
