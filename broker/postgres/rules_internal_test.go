package postgres

import (
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/conveyor-dev/conveyor/broker"
	bt "github.com/conveyor-dev/conveyor/broker/brokertest"
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

// TestRateBucketSQL: the rate bucket a capped lease keeps in its queue's
// row (caps.go) is broker.RateBucket's: after each lease, group lease and
// change of rate, the row holds what the Go rule, stepped through the
// same calls, holds (the token amounts are exact in binary, so that no
// rounding of a refill split in two tells them apart). Then the memory's
// bucket is made to miss a node's spending: the database refuses the
// group the memory let go, holds its tokens for it as the rule says, and
// the memory takes the database's bucket.
func TestRateBucketSQL(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	t0 := time.Date(2030, 3, 4, 5, 6, 7, 0, time.UTC)
	now := t0
	e, err := Open(ctx, Config{URL: pgtest.URL(t), Schema: pgtest.Schema(t, t.Name()), MaxConns: 4, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	if _, err := e.PromoteDue(ctx, t0); err != nil { // the engine's clockStart
		t.Fatal(err)
	}
	var oracle broker.RateBucket[int64]
	var cfg broker.QueueConfig
	configure := func(at time.Time, rate, burst int32) {
		t.Helper()
		now = at
		old := cfg
		cfg.RatePerSecond, cfg.RateBurst, cfg.Group.MaxSize = rate, burst, 2
		if _, err := e.UpdateQueueConfig(ctx, "q", func(c *broker.QueueConfig) { *c = cfg }); err != nil {
			t.Fatal(err)
		}
		if old.RatePerSecond > 0 {
			oracle.Start(nanos(t0), nanos(at))
		}
		oracle.Reconfigured(nanos(at), old, cfg)
	}
	check := func(step string) {
		t.Helper()
		var got broker.RateBucket[int64]
		if err := e.pool.QueryRow(ctx, `SELECT rate_tokens, rate_last, rate_held, rate_held_until, rate_holder FROM conveyor_queues
			WHERE name = 'q'`).Scan(&got.Tokens, &got.Last, &got.Held, &got.HeldUntil, &got.Holder); err != nil {
			t.Fatal(err)
		}
		if got != oracle {
			t.Fatalf("%s: the row's bucket is %+v, broker.RateBucket's %+v", step, got, oracle)
		}
	}
	lease := func(at time.Time, n int) {
		t.Helper()
		ls, err := e.Lease(ctx, broker.LeaseParams{SessionID: "s", Now: at, TTL: time.Hour, Picks: []broker.QueuePick{{Queue: "q", N: n}}})
		if err != nil {
			t.Fatal(err)
		}
		before := oracle
		oracle.Start(nanos(t0), nanos(at))
		oracle.Refill(nanos(at), cfg)
		want, _ := oracle.Alone(int64(n), nanos(at), cfg)
		oracle.Take(int(want), cfg)
		if want == 0 {
			oracle = before // the memory's bucket refused: no statement, the row is as it was
		}
		if int64(len(ls)) != want {
			t.Fatalf("lease of %d at %v: %d tasks, broker.RateBucket lets %d go", n, at.Sub(t0), len(ls), want)
		}
		check(fmt.Sprintf("lease of %d at %v", n, at.Sub(t0)))
	}
	// leaseGroup fires a group of two (MaxSize) at at and leases it.
	leaseGroup := func(at time.Time) (gid int64, leased int) {
		t.Helper()
		g := []broker.NewTask{bt.NewTask("q"), bt.NewTask("q")}
		g[0].Group, g[1].Group = "g", "g"
		if _, err := e.Enqueue(ctx, broker.EnqueueParams{Now: at, Tasks: bt.WithStates(g, at)}); err != nil {
			t.Fatal(err)
		}
		if err := e.pool.QueryRow(ctx, `SELECT gid FROM conveyor_groups WHERE queue = 'q' AND fired`).Scan(&gid); err != nil {
			t.Fatal(err)
		}
		gls, err := e.LeaseGroups(ctx, broker.GroupLeaseParams{SessionID: "s", Queue: "q", Types: []string{"test"}, N: 1, Now: at, TTL: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		for _, gl := range gls {
			leased += len(gl.Leases)
		}
		return gid, leased
	}
	if _, err := e.Enqueue(ctx, broker.EnqueueParams{Now: t0, Tasks: bt.WithStates(slices.Repeat([]broker.NewTask{bt.NewTask("q")}, 30), t0)}); err != nil {
		t.Fatal(err)
	}
	ms := time.Millisecond
	configure(t0, 8, 3)
	check("a rate set")
	lease(t0, 5)
	lease(t0.Add(125*ms), 2)  // one token
	lease(t0.Add(375*ms), 5)  // two
	lease(t0.Add(250*ms), 1)  // the clock went back: none
	lease(t0.Add(1500*ms), 5) // the burst
	at := t0.Add(1750 * ms)   // two tokens: the group of two goes
	if _, n := leaseGroup(at); n != 2 {
		t.Fatalf("the group with the tokens for it leased %d members, want 2", n)
	}
	oracle.Refill(nanos(at), cfg)
	oracle.Take(2, cfg)
	check("a group lease")
	configure(t0.Add(2*time.Second), 4, 0)
	check("a rate lowered")
	lease(t0.Add(10*time.Second), 9)
	lease(t0.Add(10*time.Second+time.Nanosecond), 1)

	// The memory's bucket is full where the row's is empty (another node
	// spent it): the database refuses the group, and holds its tokens.
	at = t0.Add(10*time.Second + 250*ms)
	e.mu.Lock()
	e.hints.queues["q"].bucket.Tokens = 4
	e.mu.Unlock()
	gid, n := leaseGroup(at)
	if n != 0 {
		t.Fatalf("the group leased %d members with the row's bucket empty, want 0", n)
	}
	oracle.Refill(nanos(at), cfg)
	if ok, _ := oracle.ForGroup(gid, 2, nanos(at), cfg); ok {
		t.Fatal("broker.RateBucket lets the group go: the case is wrong")
	}
	check("a group refused")
	e.mu.Lock()
	mem := e.hints.queues["q"].bucket.RateBucket
	e.mu.Unlock()
	if mem != oracle {
		t.Fatalf("the memory's bucket after the refusal is %+v, want the database's %+v", mem, oracle)
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
