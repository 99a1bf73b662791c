package postgres

import (
	"math"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/conveyor-dev/conveyor/broker"
	"github.com/conveyor-dev/conveyor/internal/pgtest"
)

// This file holds the rules this engine decides in SQL to the contract's
// Go functions, their oracles: each test runs the engine's own SQL over a
// table of cases and compares its answer with the function's.

// oracleConn opens a connection to the test database (no schema: the
// statements here read only the rows they are given).
func oracleConn(t *testing.T) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), pgtest.URL(t))
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close(t.Context()) })
	return conn
}

// ruleTimes are the times each oracle test tries around now (0: none).
func ruleTimes(now time.Time) []time.Time {
	return []time.Time{{}, now.Add(-time.Hour), now.Add(-time.Nanosecond), now, now.Add(time.Nanosecond), now.Add(time.Hour)}
}

// TestExpiringSQL: the tasks PromoteDue's statement archives for their
// expiry are those broker.Expired says, in the waiting states.
func TestExpiringSQL(t *testing.T) {
	t.Parallel()
	conn := oracleConn(t)
	now := time.Date(2030, 3, 4, 5, 6, 7, 0, time.UTC)
	for s := broker.StateScheduled; s < broker.NumStates; s++ {
		for _, expires := range ruleTimes(now) {
			for _, deadline := range ruleTimes(now) {
				at := expireOf(nanos(expires), nanos(deadline))
				var expireAt *int64
				if at != 0 {
					expireAt = &at
				}
				var got bool
				if err := conn.QueryRow(t.Context(), `SELECT EXISTS (SELECT 1 FROM (VALUES ($2::int2, $3::int8)) AS r(state, expire_at)
					WHERE `+expiringSQL+`)`, nanos(now), int16(s), expireAt).Scan(&got); err != nil {
					t.Fatal(err)
				}
				x, _ := broker.ExpiryOf(expires, deadline)
				if want := s.Waiting() && broker.Expired(x, now); got != want {
					t.Errorf("a %s task with expiry %v and deadline %v at %v: the SQL says %v, broker.Expired %v", s, expires, deadline, now, got, want)
				}
			}
		}
	}
}

// TestUniqueLapsedSQL: the claims claimUnique's statement takes over are
// those broker.UniqueHolds says no longer hold, whatever its task's state
// (or its absence) and the claim's TTL.
func TestUniqueLapsedSQL(t *testing.T) {
	t.Parallel()
	conn := oracleConn(t)
	now := time.Date(2030, 3, 4, 5, 6, 7, 0, time.UTC)
	for s := broker.StateUnspecified; s < broker.NumStates; s++ {
		for _, until := range ruleTimes(now) {
			// The task's row, if any, shadows conveyor_tasks for the
			// statement (StateUnspecified: the task is gone).
			var got bool
			if err := conn.QueryRow(t.Context(), `WITH conveyor_tasks (id, state) AS (
					SELECT 'holder', $2::int2 WHERE $2::int2 <> 0)
				SELECT EXISTS (SELECT 1 FROM (VALUES ('holder', $3::int8)) AS u(task_id, until)
					WHERE `+uniqueLapsedSQL("$1")+`)`, nanos(now), int16(s), nanos(until)).Scan(&got); err != nil {
				t.Fatal(err)
			}
			if want := !broker.UniqueHolds(s, until, now); got != want {
				t.Errorf("a claim of a %s task until %v at %v: the SQL says lapsed %v, broker.UniqueHolds %v", s, until, now, got, !want)
			}
		}
	}
}

// TestLeaseLimitSQL: conveyor_lease_limit, which every lease statement
// applies, is broker.LeaseLimit: a deadline, a timeout from the start, or
// both (the earlier), plus the grace, saturating instead of overflowing;
// NULL when the attempt is unbounded.
func TestLeaseLimitSQL(t *testing.T) {
	t.Parallel()
	e, err := Open(t.Context(), Config{URL: pgtest.URL(t), Schema: pgtest.Schema(t, t.Name()), MaxConns: 2})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = e.Close() })
	start := time.Date(2030, 3, 4, 5, 6, 7, 0, time.UTC)
	far := time.Unix(0, math.MaxInt64-int64(time.Second))
	deadlines := append(ruleTimes(start), far)
	timeouts := []time.Duration{0, time.Nanosecond, time.Minute, math.MaxInt64}
	graces := []time.Duration{0, 5 * time.Second, math.MaxInt64}
	for _, deadline := range deadlines {
		for _, timeout := range timeouts {
			for _, grace := range graces {
				var got *int64
				if err := e.pool.QueryRow(t.Context(), `SELECT conveyor_lease_limit($1, $2, $3, $4)`,
					nanos(deadline), int64(timeout), nanos(start), int64(grace)).Scan(&got); err != nil {
					t.Fatal(err)
				}
				want := broker.LeaseLimit(deadline, timeout, start, grace)
				if deref(got) != nanos(want) {
					t.Errorf("deadline %v, timeout %v, grace %v: the SQL says %v, broker.LeaseLimit %v",
						deadline, timeout, grace, deref(got), nanos(want))
				}
			}
		}
	}
}
