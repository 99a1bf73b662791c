package postgres

import (
	"slices"
	"testing"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
	bt "github.com/conveyor-dev/conveyor/broker/brokertest"
	"github.com/conveyor-dev/conveyor/internal/pgtest"
	"github.com/conveyor-dev/conveyor/internal/testwait"
)

// TestLeasesOfSessionsShareAWalk: Lease calls that arrive while another's
// transaction runs are leased together in the next one, the calls of one
// queue by one walk whose rows are dealt out in turn: when the walk comes
// out short (rows another transaction holds), each call gets its share,
// where walks call by call would give the first all it asked for. A
// merged transaction that fails for one call is run call by call, so
// that the others still get their leases.
func TestLeasesOfSessionsShareAWalk(t *testing.T) {
	t.Parallel()
	e, _ := openNode(t, pgtest.Schema(t, t.Name()))
	ctx := t.Context()
	now := time.Now()
	if _, err := e.UpdateQueueConfig(ctx, "capped", func(c *broker.QueueConfig) { c.MaxActive = 10 }); err != nil {
		t.Fatal(err)
	}
	enqueueAt(t, e, now, bt.NewTask("capped"), bt.NewTask("capped"))
	var ready []string
	for range 10 {
		ready = append(ready, enqueueAt(t, e, now, bt.NewTask("q"))[0].ID)
	}
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
	// behind runs a Lease of the capped queue, which waits for the queue's
	// row (held by another transaction), and the calls of rest behind it;
	// while they run, two of q's ready tasks are held too.
	behind := func(rest ...func() chan answer) []answer {
		t.Helper()
		held, err := e.begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := held.exec(ctx, `SELECT FROM conveyor_tasks WHERE id = ANY($1) FOR UPDATE`, ready[:2]); err != nil {
			t.Fatal(err)
		}
		locker, err := e.begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var lockPID int
		if err := locker.queryRow(ctx, `SELECT pg_backend_pid() FROM conveyor_queues WHERE name = 'capped' FOR UPDATE`).Scan(&lockPID); err != nil {
			t.Fatal(err)
		}
		chs := []chan answer{leaseOf("first", "capped", 1)}
		waitBlockedBy(t, e, lockPID, "%", "the first call to wait for its queue's row")
		for _, call := range rest {
			chs = append(chs, call())
		}
		testwait.Until(t, 30*time.Second, "the other calls to wait behind it", func() bool {
			e.leases.mu.Lock()
			defer e.leases.mu.Unlock()
			return len(e.leases.waiting) == len(rest)
		})
		if err := e.commit(ctx, locker); err != nil {
			t.Fatal(err)
		}
		answers := make([]answer, len(chs))
		for i, ch := range chs {
			answers[i] = <-ch
		}
		_ = held.tx.Rollback(ctx)
		return answers
	}
	leased := func(what string, a answer, n int) []string {
		t.Helper()
		if a.err != nil || len(a.out) != n {
			t.Fatalf("%s: %d leases, %v; want %d", what, len(a.out), a.err, n)
		}
		var ids []string
		for _, l := range a.out {
			if l.Task.Queue != a.out[0].Task.Queue {
				t.Fatalf("%s: leases of %s and %s", what, l.Task.Queue, a.out[0].Task.Queue)
			}
			ids = append(ids, l.Task.ID)
		}
		return ids
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

	// Eight of q's ten tasks are free to take; the two calls ask for five
	// each, and share them four and four.
	answers := behind(func() chan answer { return leaseOf("b", "q", 5) }, func() chan answer { return leaseOf("c", "q", 5) })
	first := leased("the first call", answers[0], 1)
	b, c := leased("the second call", answers[1], 4), leased("the third call", answers[2], 4)
	if x := xmins(append(b, c...)); len(x) != 1 || slices.Equal(x, xmins(first)) {
		t.Fatalf("the calls that waited committed in transactions %v (the first in %v), want one of their own", x, xmins(first))
	}
	for _, l := range answers[1].out {
		if l.Task.ID == ready[0] || l.Task.ID == ready[1] {
			t.Fatalf("the second call leased %s, which another transaction held", l.Task.ID)
		}
	}

	// A session id PostgreSQL refuses (NUL is no text) fails the merged
	// transaction's statement; run alone, the other call gets its leases.
	enqueueAt(t, e, now, bt.NewTask("q"), bt.NewTask("q"))
	answers = behind(func() chan answer { return leaseOf("d", "q", 1) }, func() chan answer { return leaseOf("bad\x00", "q", 1) })
	leased("the first call", answers[0], 1)
	leased("the call merged with a failing one", answers[1], 1)
	if answers[2].err == nil {
		t.Fatalf("the call whose session id has a NUL succeeded: %d leases", len(answers[2].out))
	}
}
