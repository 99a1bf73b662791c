package postgres

import (
	cryptorand "crypto/rand"
	"errors"
	"math"
	"net/url"
	"regexp"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/oklog/ulid/v2"
)

// Times are stored as Unix nanoseconds; 0 is "none". The span of an
// int64 (1678 to 2262) clamps, as on the embedded engine.
var (
	maxNanosTime = time.Unix(0, math.MaxInt64)
	minNanosTime = time.Unix(0, math.MinInt64+1)
)

// nanos is t as stored: 0 for the zero time, clamped to the span, and
// never 0 for a real time.
func nanos(t time.Time) int64 {
	switch {
	case t.IsZero():
		return 0
	case t.After(maxNanosTime):
		return math.MaxInt64
	case t.Before(minNanosTime):
		return math.MinInt64 + 1
	}
	if n := t.UnixNano(); n != 0 {
		return n
	}
	return 1
}

// fromNanos is a stored time (the zero time for 0).
func fromNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

// satAdd is n + d, clamped to the span.
func satAdd(n int64, d time.Duration) int64 {
	switch {
	case d > 0 && n > math.MaxInt64-int64(d):
		return math.MaxInt64
	case d < 0 && n < math.MinInt64+1-int64(d):
		return math.MinInt64 + 1
	}
	return n + int64(d)
}

// idSource makes the ids of tasks enqueued without one: ULIDs of the
// enqueue time, strictly increasing within the process whatever the clock
// does.
type idSource struct {
	mu      sync.Mutex
	entropy *ulid.MonotonicEntropy
	last    ulid.ULID
}

func (s *idSource) next(now time.Time) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.entropy == nil {
		s.entropy = ulid.Monotonic(cryptorand.Reader, 0)
	}
	id, err := ulid.New(ulid.Timestamp(now), s.entropy)
	if err != nil || id.Compare(s.last) <= 0 {
		id = s.last
		for i := len(id) - 1; i >= 6; i-- {
			if id[i]++; id[i] != 0 {
				break
			}
		}
	}
	s.last = id
	return id.String()
}

// RedactURL is a database URL fit for a log or an error: its password
// replaced, in URL and in key=value form.
func RedactURL(s string) string {
	if u, err := url.Parse(s); err == nil && u.Scheme != "" {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
		}
		q := u.Query()
		if q.Has("password") {
			q.Set("password", "xxxxx")
			u.RawQuery = q.Encode()
		}
		return u.String()
	}
	return keyValuePassword.ReplaceAllString(s, "${1}xxxxx")
}

var keyValuePassword = regexp.MustCompile(`(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)`)

// isUndefinedTable reports whether err is the database saying a table does
// not exist.
func isUndefinedTable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "42P01"
}

// isNoRows reports whether err is a query that found no row.
func isNoRows(err error) bool { return errors.Is(err, pgx.ErrNoRows) }

// collectStrings reads a column of strings.
func collectStrings(rows pgx.Rows) ([]string, error) {
	return pgx.CollectRows(rows, pgx.RowTo[string])
}
