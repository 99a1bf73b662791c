package postgres

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/conveyor-dev/conveyor/broker"
	bt "github.com/conveyor-dev/conveyor/broker/brokertest"
	"github.com/conveyor-dev/conveyor/internal/pgtest"
)

// TestConnectionsAreWarmedBeforeTheyServe: once Open returned and a
// session named its route (WarmLeases), every connection of the pool has
// the hot statements and the route's lease statements prepared and
// planned, so the leases that follow prepare no statement of their own;
// and a connection the pool makes later is warmed the same before it is
// handed out.
func TestConnectionsAreWarmedBeforeTheyServe(t *testing.T) {
	t.Parallel()
	const conns = 2
	e := openPool(t, conns)
	for i, prepared := range preparedOnEach(t, e.pool, conns) {
		if !slices.ContainsFunc(prepared, isStatement(insertTasksSQL)) || !slices.ContainsFunc(prepared, isStatement(addTotalsSQL)) {
			t.Fatalf("connection %d after Open holds %q: no enqueue, no totals", i, prepared)
		}
	}

	route := broker.Route{Types: []string{"a"}, StartAuthorization: true}
	e.WarmLeases(t.Context(), route)
	warmed := leaseStatements(preparedOnEach(t, e.pool, conns))
	for i, l := range warmed {
		if len(l) != 2 || !slices.Equal(l, warmed[0]) {
			t.Fatalf("connection %d holds the lease statements %q after WarmLeases, want the typed walk's two, as the others", i, l)
		}
	}

	// Leases by the route, from the start of the line, then from its
	// floors, on either connection: none prepares a lease statement.
	now := time.Now()
	task := bt.NewTask("q")
	task.Type = "a"
	enqueueAt(t, e, now, task, task, task)
	for range 2 {
		ls, err := e.Lease(t.Context(), broker.LeaseParams{SessionID: "s", Now: now, TTL: time.Hour, Route: route,
			Picks: []broker.QueuePick{{Queue: "q", N: 1}}})
		if err != nil || len(ls) != 1 {
			t.Fatalf("Lease: %d leases, %v", len(ls), err)
		}
	}
	if after := leaseStatements(preparedOnEach(t, e.pool, conns)); !slices.EqualFunc(after, warmed, slices.Equal) {
		t.Fatalf("the leases prepared statements of their own: %q before them, %q after", warmed, after)
	}

	// A connection the pool makes now is warmed for the route too.
	c, err := e.pool.Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Conn().Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	c.Release() // closed: the pool drops it and makes another
	for i, l := range leaseStatements(preparedOnEach(t, e.pool, conns)) {
		if !slices.Equal(l, warmed[0]) {
			t.Fatalf("connection %d holds the lease statements %q after the pool replaced one, want %q", i, l, warmed[0])
		}
	}
}

// preparedOnEach lists the statements prepared on each of the pool's n
// connections (held together, so that they are n different ones) and
// planned at least once.
func preparedOnEach(t *testing.T, pool *pgxpool.Pool, n int) [][]string {
	t.Helper()
	out := make([][]string, n)
	var held []*pgxpool.Conn
	defer func() {
		for _, c := range held {
			c.Release()
		}
	}()
	for i := range n {
		c, err := pool.Acquire(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
		rows, err := c.Query(t.Context(), `SELECT statement FROM pg_prepared_statements
			WHERE generic_plans + custom_plans > 0 ORDER BY statement`)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				t.Fatal(err)
			}
			out[i] = append(out[i], s)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// leaseStatements keeps the lease statements of each list.
func leaseStatements(prepared [][]string) [][]string {
	out := make([][]string, len(prepared))
	for i, p := range prepared {
		out[i] = slices.DeleteFunc(slices.Clone(p), func(s string) bool { return !isStatement(leaseSQL("", 8)[:40])(s) })
	}
	return out
}

// openPool opens an engine of conns connections on a schema of its own.
func openPool(t *testing.T, conns int32) *Engine {
	t.Helper()
	e, err := Open(t.Context(), Config{URL: pgtest.URL(t), Schema: pgtest.Schema(t, t.Name()), MaxConns: conns})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return e
}

// isStatement matches a prepared statement that begins with sql.
func isStatement(sql string) func(string) bool {
	return func(s string) bool { return strings.HasPrefix(s, sql) }
}

// TestPushLeasesTakeTheZeroRoutesWarmUp: a push endpoint's consumer
// names the zero route (broker.Route{}) before it leases; its leases
// (LeaseParams.Push) then run the statement that warm-up readied on
// every connection, and prepare none of their own.
func TestPushLeasesTakeTheZeroRoutesWarmUp(t *testing.T) {
	t.Parallel()
	const conns = 2
	e := openPool(t, conns)
	e.WarmLeases(t.Context(), broker.Route{})
	warmed := leaseStatements(preparedOnEach(t, e.pool, conns))
	for i, l := range warmed {
		if len(l) == 0 || !slices.Equal(l, warmed[0]) {
			t.Fatalf("connection %d holds the lease statements %q after WarmLeases, want the zero route's, as the others", i, l)
		}
	}
	now := time.Now()
	enqueueAt(t, e, now, bt.NewTask("hooks"), bt.NewTask("hooks"), bt.NewTask("hooks"))
	for range 2 {
		ls, err := e.Lease(t.Context(), broker.LeaseParams{SessionID: "push:hooks", Now: now, TTL: time.Hour, Push: true,
			Picks: []broker.QueuePick{{Queue: "hooks", N: 1}}})
		if err != nil || len(ls) != 1 {
			t.Fatalf("Lease: %d leases, %v", len(ls), err)
		}
	}
	if after := leaseStatements(preparedOnEach(t, e.pool, conns)); !slices.EqualFunc(after, warmed, slices.Equal) {
		count := func(l [][]string) []int {
			n := make([]int, len(l))
			for i := range l {
				n[i] = len(l[i])
			}
			return n
		}
		t.Fatalf("the push leases prepared statements of their own: lease statements per connection %v before them, %v after",
			count(warmed), count(after))
	}
}
