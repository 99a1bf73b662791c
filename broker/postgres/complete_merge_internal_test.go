package postgres

import (
	"testing"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
	bt "github.com/conveyor-dev/conveyor/broker/brokertest"
	"github.com/conveyor-dev/conveyor/internal/pgtest"
	"github.com/conveyor-dev/conveyor/internal/testwait"
)

// TestResultsOfSessionsShareATransaction: CompleteBatch calls that arrive
// while another's transaction runs are applied together in the next one
// (their rows carry one transaction id), each call gets its own answers,
// and a merged transaction that fails for one call's decisions is applied
// call by call, so that the others still complete.
func TestResultsOfSessionsShareATransaction(t *testing.T) {
	t.Parallel()
	e, _ := openNode(t, pgtest.Schema(t, t.Name()))
	ctx := t.Context()
	now := time.Now()
	enqueueAt(t, e, now, bt.NewTask("q"), bt.NewTask("q"), bt.NewTask("q"), bt.NewTask("q"), bt.NewTask("q"))
	decision := func(session string) broker.Decision {
		l := lease(t, e, session, "q")
		return broker.Decision{Kind: broker.DecideComplete, Verdict: true, SessionID: session, Now: now,
			Lease: broker.LeaseRef{TaskID: l.Task.ID, Token: l.Token}}
	}
	type answer struct {
		out []broker.Completion
		err error
	}
	complete := func(ds ...broker.Decision) chan answer {
		ch := make(chan answer, 1)
		go func() {
			out, err := e.CompleteBatch(ctx, ds)
			ch <- answer{out, err}
		}()
		return ch
	}
	// behind runs the CompleteBatch calls of rest while first's waits for
	// its task's row, which another transaction holds, and returns every
	// call's answer once that transaction ends.
	behind := func(first broker.Decision, rest ...[]broker.Decision) []answer {
		t.Helper()
		locker, err := e.begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var lockPID int
		if err := locker.queryRow(ctx, `SELECT pg_backend_pid() FROM conveyor_tasks WHERE id = $1 FOR UPDATE`,
			first.Lease.TaskID).Scan(&lockPID); err != nil {
			t.Fatal(err)
		}
		chs := []chan answer{complete(first)}
		waitBlockedBy(t, e, lockPID, "%", "the first call to wait for its task's row")
		for _, ds := range rest {
			chs = append(chs, complete(ds...))
		}
		testwait.Until(t, 30*time.Second, "the other calls to wait behind it", func() bool {
			e.results.mu.Lock()
			defer e.results.mu.Unlock()
			return len(e.results.waiting) == len(rest)
		})
		if err := e.commit(ctx, locker); err != nil {
			t.Fatal(err)
		}
		answers := make([]answer, len(chs))
		for i, ch := range chs {
			answers[i] = <-ch
		}
		return answers
	}
	completed := func(what string, a answer, n int) {
		t.Helper()
		if a.err != nil || len(a.out) != n {
			t.Fatalf("%s: %d answers, %v; want %d", what, len(a.out), a.err, n)
		}
		for i, c := range a.out {
			if c.Err != nil || c.State != broker.StateCompleted {
				t.Fatalf("%s, decision %d: %v, %v; want COMPLETED", what, i, c.State, c.Err)
			}
		}
	}
	xmin := func(id string) string {
		t.Helper()
		var x string
		if err := e.pool.QueryRow(ctx, `SELECT xmin::text FROM conveyor_tasks WHERE id = $1`, id).Scan(&x); err != nil {
			t.Fatal(err)
		}
		return x
	}

	a, b, c := decision("a"), decision("b"), decision("c")
	answers := behind(a, []broker.Decision{b}, []broker.Decision{c})
	for i, what := range []string{"the first call", "the second", "the third"} {
		completed(what, answers[i], 1)
	}
	if xb, xc := xmin(b.Lease.TaskID), xmin(c.Lease.TaskID); xb != xc || xb == xmin(a.Lease.TaskID) {
		t.Fatalf("the calls that waited committed in transactions %s and %s (the first in %s), want one of their own",
			xb, xc, xmin(a.Lease.TaskID))
	}

	// A session id PostgreSQL refuses (NUL is no text) fails the merged
	// transaction's statement; applied alone, the other call completes.
	d, f := decision("d"), decision("f")
	bad := broker.Decision{Kind: broker.DecideComplete, Verdict: true, SessionID: "bad\x00", Now: now,
		Lease: broker.LeaseRef{TaskID: bt.NewID(), Token: 1}}
	badToo := bad
	badToo.Lease.TaskID = bt.NewID()
	answers = behind(d, []broker.Decision{f}, []broker.Decision{bad, badToo})
	completed("the first call", answers[0], 1)
	completed("the call merged with a failing one", answers[1], 1)
	if answers[2].err == nil {
		t.Fatalf("the call whose session id has a NUL succeeded: %v", answers[2].out)
	}
}
