package postgres

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
	bt "github.com/conveyor-dev/conveyor/broker/brokertest"
	"github.com/conveyor-dev/conveyor/internal/pgtest"
	"github.com/conveyor-dev/conveyor/internal/testwait"
)

// TestLeasesOfSessionsShareAWalk: Lease calls of a queue that arrive
// while another's transaction runs are leased together in the next one,
// by one walk whose rows are dealt out in turn: when the walk comes out
// short (rows another transaction holds), each call gets its share, where
// walks call by call would give the first all it asked for. A merged
// transaction that fails for one call is run call by call, so that the
// others still get their leases. A call of another queue does not wait
// for them.
func TestLeasesOfSessionsShareAWalk(t *testing.T) {
	t.Parallel()
	e, _ := openNode(t, pgtest.Schema(t, t.Name()))
	ctx := t.Context()
	now := time.Now()
	type answer struct {
		out []broker.Lease
		err error
	}
	leaseOf := func(session, queue string, n int) chan answer {
		ch := make(chan answer, 1)
		go func() {
			out, err := e.Lease(ctx, broker.LeaseParams{SessionID: session, Now: time.Now(), TTL: time.Hour,
				Picks: []broker.QueuePick{{Queue: queue, N: n}}})
			ch <- answer{out, err}
		}()
		return ch
	}
	group := func(queue string) (running bool, waiting int) {
		e.leases.mu.Lock()
		defer e.leases.mu.Unlock()
		g := e.leases.m[queue]
		if g == nil {
			return false, 0
		}
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.running, len(g.waiting)
	}
	leased := func(what string, a answer, n int) []string {
		t.Helper()
		if a.err != nil || len(a.out) != n {
			t.Fatalf("%s: %d leases, %v; want %d", what, len(a.out), a.err, n)
		}
		var ids []string
		for _, l := range a.out {
			ids = append(ids, l.Task.ID)
		}
		return ids
	}
	// behind runs a Lease of one of q's tasks whose transaction waits (for
	// the lock a reclaim takes whole), and the calls of rest behind it;
	// while they run, the two tasks of held are locked by another
	// transaction.
	behind := func(held []string, rest ...func() chan answer) []answer {
		t.Helper()
		locker, err := e.begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = locker.tx.Rollback(ctx) }()
		if _, err := locker.exec(ctx, `SELECT FROM conveyor_tasks WHERE id = ANY($1) FOR UPDATE`, held); err != nil {
			t.Fatal(err)
		}
		e.lapses.Lock()
		locked := true
		defer func() {
			if locked { // a failed wait: let the calls end
				e.lapses.Unlock()
			}
		}()
		chs := []chan answer{leaseOf("first", "q", 1)}
		testwait.Until(t, 30*time.Second, "the first call to run", func() bool { running, _ := group("q"); return running })
		for _, call := range rest {
			chs = append(chs, call())
		}
		testwait.Until(t, 30*time.Second, "the other calls to wait behind it", func() bool {
			_, waiting := group("q")
			return waiting == len(rest)
		})
		e.lapses.Unlock()
		locked = false
		answers := make([]answer, len(chs))
		for i, ch := range chs {
			answers[i] = <-ch
		}
		return answers
	}
	xmins := func(ids []string) []string {
		t.Helper()
		var out []string
		for _, id := range ids {
			var x string
			if err := e.pool.QueryRow(ctx, `SELECT xmin::text FROM conveyor_tasks WHERE id = $1 AND state = 3`, id).Scan(&x); err != nil {
				t.Fatalf("task %s: %v", id, err)
			}
			out = append(out, x)
		}
		return slices.Compact(out)
	}
	enqueue := func(n int) []string {
		var ids []string
		for range n {
			ids = append(ids, enqueueAt(t, e, now, bt.NewTask("q"))[0].ID)
		}
		return ids
	}

	// The first call takes the first of q's eleven tasks, two are held,
	// and the two calls behind it ask for five each of the eight left:
	// they get four each.
	ready := enqueue(11)
	answers := behind(ready[1:3], func() chan answer { return leaseOf("b", "q", 5) }, func() chan answer { return leaseOf("c", "q", 5) })
	first := leased("the first call", answers[0], 1)
	b, c := leased("the second call", answers[1], 4), leased("the third call", answers[2], 4)
	if x := xmins(append(b, c...)); len(x) != 1 || slices.Equal(x, xmins(first)) {
		t.Fatalf("the calls that waited committed in transactions %v (the first in %v), want one of their own", x, xmins(first))
	}
	for _, id := range append(b, c...) {
		if id == ready[1] || id == ready[2] {
			t.Fatalf("leased %s, which another transaction held", id)
		}
	}

	// A session id PostgreSQL refuses (NUL is no text) fails the merged
	// transaction's statement; run alone, the other call gets its leases.
	enqueue(2)
	answers = behind(ready[1:3], func() chan answer { return leaseOf("d", "q", 1) }, func() chan answer { return leaseOf("bad\x00", "q", 1) })
	leased("the first call", answers[0], 1)
	leased("the call merged with a failing one", answers[1], 1)
	if answers[2].err == nil {
		t.Fatalf("the call whose session id has a NUL succeeded: %d leases", len(answers[2].out))
	}

	// A call of another queue runs while one waits for its queue's row.
	if _, err := e.UpdateQueueConfig(ctx, "capped", func(c *broker.QueueConfig) { c.MaxActive = 10 }); err != nil {
		t.Fatal(err)
	}
	enqueueAt(t, e, now, bt.NewTask("capped"), bt.NewTask("other"))
	locker, err := e.begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var lockPID int
	if err := locker.queryRow(ctx, `SELECT pg_backend_pid() FROM conveyor_queues WHERE name = 'capped' FOR UPDATE`).Scan(&lockPID); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = locker.tx.Rollback(ctx) }()
	waiting := leaseOf("e", "capped", 1)
	waitBlockedBy(t, e, lockPID, "%", "the capped queue's call to wait for its row")
	select {
	case a := <-leaseOf("f", "other", 1):
		leased("the other queue's call", a, 1)
	case <-time.After(30 * time.Second):
		t.Fatal("the other queue's call waited for the capped queue's")
	}
	if err := e.commit(ctx, locker); err != nil {
		t.Fatal(err)
	}
	leased("the capped queue's call", <-waiting, 1)
}

// TestLeaseLeavesTheQueueWhenItsCallEnds: a Lease call waiting behind
// another's transaction returns when its ctx ends, without waiting for
// that transaction, and leases nothing; the transaction it waited for
// still gets its own.
func TestLeaseLeavesTheQueueWhenItsCallEnds(t *testing.T) {
	t.Parallel()
	e, _ := openNode(t, pgtest.Schema(t, t.Name()))
	now := time.Now()
	enqueueAt(t, e, now, bt.NewTask("q"), bt.NewTask("q"))
	type answer struct {
		out []broker.Lease
		err error
	}
	leaseOf := func(ctx context.Context, session string) chan answer {
		ch := make(chan answer, 1)
		go func() {
			out, err := e.Lease(ctx, broker.LeaseParams{SessionID: session, Now: now, TTL: time.Hour,
				Picks: []broker.QueuePick{{Queue: "q", N: 1}}})
			ch <- answer{out, err}
		}()
		return ch
	}
	waiting := func() (running bool, n int) {
		e.leases.mu.Lock()
		defer e.leases.mu.Unlock()
		g := e.leases.m["q"]
		if g == nil {
			return false, 0
		}
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.running, len(g.waiting)
	}

	e.lapses.Lock() // the first call's transaction waits for it
	locked := true
	defer func() {
		if locked {
			e.lapses.Unlock()
		}
	}()
	first := leaseOf(t.Context(), "first")
	testwait.Until(t, 30*time.Second, "the first call to run", func() bool { running, _ := waiting(); return running })
	ctx, cancel := context.WithCancel(t.Context())
	second := leaseOf(ctx, "second")
	testwait.Until(t, 30*time.Second, "the second call to wait", func() bool { _, n := waiting(); return n == 1 })
	cancel()
	select {
	case a := <-second:
		if !errors.Is(a.err, context.Canceled) || len(a.out) != 0 {
			t.Fatalf("the ended call: %d leases, %v; want none and context.Canceled", len(a.out), a.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the call whose ctx ended still waits for the transaction ahead of it")
	}
	if _, n := waiting(); n != 0 {
		t.Fatalf("%d calls still wait behind the first, want none", n)
	}
	e.lapses.Unlock()
	locked = false
	if a := <-first; a.err != nil || len(a.out) != 1 {
		t.Fatalf("the first call: %d leases, %v; want 1", len(a.out), a.err)
	}
	var active int
	if err := e.pool.QueryRow(t.Context(), `SELECT count(*) FROM conveyor_tasks WHERE state = 3`).Scan(&active); err != nil || active != 1 {
		t.Fatalf("%d tasks ACTIVE (%v), want 1: the ended call leased nothing", active, err)
	}
}
