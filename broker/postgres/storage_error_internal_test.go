package postgres

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/conveyor-dev/conveyor/broker"
)

// TestStorageErrorClassifies: an error that says the database could not
// be reached, or its connection broke, is broker.ErrUnavailable (the
// caller may retry; a session keeps its Results for later), whatever the
// layer it comes from; an error of the statement or the caller's is not.
func TestStorageErrorClassifies(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name        string
		err         error
		unavailable bool
	}{
		// PostgreSQL killed, or restarted, under a query in flight.
		{"connection reset on read", &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}, true},
		{"broken pipe on write", &net.OpError{Op: "write", Net: "tcp", Err: syscall.EPIPE}, true},
		{"unexpected EOF", io.ErrUnexpectedEOF, true},
		{"admin shutdown", &pgconn.PgError{Code: "57P01"}, true},
		{"starting up", &pgconn.PgError{Code: "57P03"}, true},
		{"unique violation", &pgconn.PgError{Code: "23505"}, false},
		{"the caller's context", context.Canceled, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := &Engine{}
			err := e.storageError(c.err)
			if got := errors.Is(err, broker.ErrUnavailable); got != c.unavailable {
				t.Fatalf("storageError(%v) = %v: unavailable %v, want %v", c.err, err, got, c.unavailable)
			}
			if !errors.Is(err, c.err) {
				t.Fatalf("storageError(%v) = %v, which does not wrap it", c.err, err)
			}
		})
	}
}
