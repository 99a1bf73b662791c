package postgres_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/conveyor-dev/conveyor/broker"
	bt "github.com/conveyor-dev/conveyor/broker/brokertest"
	"github.com/conveyor-dev/conveyor/broker/postgres"
	"github.com/conveyor-dev/conveyor/internal/pgtest"
)

// This file holds a queue's caps across two nodes: two engines on one
// schema, each reserving the caps in its own memory, which misses the
// other's leases; the database must keep the caps for both.

// fakeClock is a clock the test moves.
type fakeClock struct{ ns atomic.Int64 }

func (c *fakeClock) Now() time.Time        { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) Set(at time.Time)      { c.ns.Store(at.UnixNano()) }
func newFakeClock(at time.Time) *fakeClock { c := &fakeClock{}; c.Set(at); return c }

// twoNodes opens two engines on the schema of store, the second once
// setup ran on the first (the second learns of the queue's caps when it
// opens). Both open before any lease: an engine that opens releases the
// ACTIVE tasks of the schema.
func twoNodes(t *testing.T, store string, cfg postgres.Config, setup func(*postgres.Engine)) (*postgres.Engine, *postgres.Engine, *pgx.Conn) {
	t.Helper()
	store += fmt.Sprint(time.Now().UnixNano()) // a schema of its own for each run of the test (-count)
	e1 := openEngine(t, store, cfg)
	setup(e1)
	e2 := openEngine(t, store, cfg)
	schema, _ := schemas.Load(store)
	conn, err := pgx.Connect(t.Context(), pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(t.Context()) })
	if _, err := conn.Exec(t.Context(), "SET search_path TO "+pgx.Identifier{schema.(string)}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	return e1, e2, conn
}

// enqueueN enqueues n tasks into queue at now.
func enqueueN(t *testing.T, e *postgres.Engine, queue string, n int, now time.Time) {
	t.Helper()
	tasks := make([]broker.NewTask, n)
	for i := range tasks {
		tasks[i] = bt.NewTask(queue)
	}
	if _, err := e.Enqueue(t.Context(), broker.EnqueueParams{Now: now, Tasks: bt.WithStates(tasks, now)}); err != nil {
		t.Fatal(err)
	}
}

// leaseBoth has each of two engines lease up to n tasks of queue at now
// from two goroutines at once, and returns the leases by engine.
func leaseBoth(t *testing.T, es [2]*postgres.Engine, queue string, n int, now time.Time) [2][]broker.Lease {
	t.Helper()
	var mu sync.Mutex
	var got [2][]broker.Lease
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			ls, err := es[i%2].Lease(t.Context(), broker.LeaseParams{SessionID: "s", Now: now, TTL: time.Hour,
				Picks: []broker.QueuePick{{Queue: queue, N: n}}})
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			got[i%2] = append(got[i%2], ls...)
			mu.Unlock()
		})
	}
	wg.Wait()
	return got
}

// activeIn counts queue's ACTIVE tasks in the database.
func activeIn(t *testing.T, conn *pgx.Conn, queue string) int {
	t.Helper()
	var active int
	if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM conveyor_tasks WHERE queue = $1 AND state = 3`, queue).Scan(&active); err != nil {
		t.Fatal(err)
	}
	return active
}

// completeBoth completes, on the engine that leased each, the leases of
// session "s" that leaseBoth (or a group lease) returned.
func completeBoth(t *testing.T, es [2]*postgres.Engine, got [2][]broker.Lease, now time.Time) {
	t.Helper()
	for i, ls := range got {
		ds := make([]broker.Decision, len(ls))
		for j, l := range ls {
			ds[j] = broker.Completed("s", broker.LeaseRef{TaskID: l.Task.ID, Token: l.Token}, now, nil)
		}
		if _, err := es[i].CompleteBatch(t.Context(), ds); err != nil {
			t.Fatal(err)
		}
	}
}

// TestMaxActiveAcrossNodes: two nodes leasing from one queue at once
// never hold more ACTIVE tasks together than its max_active, counted in
// the database, and together fill the cap.
func TestMaxActiveAcrossNodes(t *testing.T) {
	t.Parallel()
	const maxActive, rounds = 3, 40
	now := time.Now()
	e1, e2, conn := twoNodes(t, t.Name(), postgres.Config{MaxConns: 4}, func(e *postgres.Engine) {
		if _, err := e.UpdateQueueConfig(t.Context(), "q", func(c *broker.QueueConfig) { c.MaxActive = maxActive }); err != nil {
			t.Fatal(err)
		}
		enqueueN(t, e, "q", rounds*maxActive, now)
	})
	es := [2]*postgres.Engine{e1, e2}
	for round := range rounds {
		got := leaseBoth(t, es, "q", 2, now)
		active := activeIn(t, conn, "q")
		if n := len(got[0]) + len(got[1]); n != maxActive || active != maxActive {
			t.Fatalf("round %d: the nodes leased %d and %d tasks, %d ACTIVE in the database; want %d together under max_active %d",
				round, len(got[0]), len(got[1]), active, maxActive, maxActive)
		}
		completeBoth(t, es, got, now)
	}
}

// TestRateAcrossNodes: two nodes leasing from one queue with a rate limit
// lease no more over a window than its burst and its rate allow together,
// and together get about that much. A node whose bucket the database
// refused takes the database's: its Ready says nothing is dispatchable
// then, instead of sending its sessions to lease in vain, and its
// sessions are woken when the bucket refills.
func TestRateAcrossNodes(t *testing.T) {
	t.Parallel()
	const rate, burst = 10, 5
	const step, window = 10 * time.Millisecond, 2 * time.Second
	t0 := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	clock := newFakeClock(t0)
	note := &readySignals{n: map[string]int{}}
	e1, e2, _ := twoNodes(t, t.Name(), postgres.Config{MaxConns: 4, Now: clock.Now, Notifier: note}, func(e *postgres.Engine) {
		if _, err := e.UpdateQueueConfig(t.Context(), "q", func(c *broker.QueueConfig) {
			c.RatePerSecond, c.RateBurst = rate, burst
		}); err != nil {
			t.Fatal(err)
		}
		enqueueN(t, e, "q", 100, t0)
	})
	es := [2]*postgres.Engine{e1, e2}
	var leased [2]int
	end := t0.Add(window)
	for at := t0; !at.After(end); at = at.Add(step) {
		clock.Set(at)
		got := leaseBoth(t, es, "q", 3, at)
		leased[0], leased[1] = leased[0]+len(got[0]), leased[1]+len(got[1])
	}
	total := leased[0] + leased[1]
	if limit := burst + int(rate*window.Seconds()); total > limit || total < limit-2 {
		t.Fatalf("the nodes leased %d and %d tasks over %v, %d together; want at most burst %d + rate %d/s × %v = %d, and about that many",
			leased[0], leased[1], window, total, burst, rate, window, limit)
	}
	counts := make([]int, 1)
	for i, e := range es {
		if e.Ready([]string{"q"}, counts); counts[0] != 0 {
			t.Errorf("node %d: Ready says %d tasks dispatchable at the end, with the database's bucket empty; want 0", i+1, counts[0])
		}
	}
	next, err := e2.PromoteDue(t.Context(), end)
	if err != nil {
		t.Fatal(err)
	}
	if next.IsZero() {
		// A wake armed before the end was due: it woke the sessions, whose
		// look (Ready) arms the next.
		e2.Ready([]string{"q"}, counts)
		if next, err = e2.PromoteDue(t.Context(), end); err != nil {
			t.Fatal(err)
		}
	}
	before := note.count("q")
	if next.IsZero() || next.After(end.Add(time.Second/rate+time.Millisecond)) {
		t.Fatalf("PromoteDue at the end asks to run next at %v; want the refill, by %v", next, end.Add(time.Second/rate))
	}
	if _, err := e2.PromoteDue(t.Context(), next); err != nil {
		t.Fatal(err)
	}
	if note.count("q") == before {
		t.Fatalf("no TasksReady for the queue at its refill, %v", next)
	}
}

// TestMaxActiveGroupsAcrossNodes: two nodes leasing fired groups of one
// queue at once never hold more ACTIVE members together than its
// max_active.
func TestMaxActiveGroupsAcrossNodes(t *testing.T) {
	t.Parallel()
	const maxActive, rounds = 2, 20
	now := time.Now()
	e1, e2, conn := twoNodes(t, t.Name(), postgres.Config{MaxConns: 4}, func(e *postgres.Engine) {
		if _, err := e.UpdateQueueConfig(t.Context(), "q", func(c *broker.QueueConfig) {
			c.MaxActive, c.Group.MaxSize = maxActive, 2
		}); err != nil {
			t.Fatal(err)
		}
		for i := range 2 * rounds {
			g := []broker.NewTask{bt.NewTask("q"), bt.NewTask("q")}
			g[0].Group, g[1].Group = fmt.Sprint("g", i), fmt.Sprint("g", i)
			if _, err := e.Enqueue(t.Context(), broker.EnqueueParams{Now: now, Tasks: bt.WithStates(g, now)}); err != nil {
				t.Fatal(err)
			}
		}
	})
	es := [2]*postgres.Engine{e1, e2}
	for round := range rounds {
		var mu sync.Mutex
		var got [2][]broker.Lease
		var wg sync.WaitGroup
		for i := range 4 {
			wg.Go(func() {
				gls, err := es[i%2].LeaseGroups(t.Context(), broker.GroupLeaseParams{SessionID: "s", Queue: "q", Types: []string{"test"},
					N: 1, Now: now, TTL: time.Hour})
				if err != nil {
					t.Error(err)
				}
				mu.Lock()
				for _, gl := range gls {
					got[i%2] = append(got[i%2], gl.Leases...)
				}
				mu.Unlock()
			})
		}
		wg.Wait()
		active := activeIn(t, conn, "q")
		if n := len(got[0]) + len(got[1]); n != maxActive || active != maxActive {
			t.Fatalf("round %d: the nodes leased %d and %d members, %d ACTIVE in the database; want one group of %d under max_active %d",
				round, len(got[0]), len(got[1]), active, maxActive, maxActive)
		}
		completeBoth(t, es, got, now)
	}
}
