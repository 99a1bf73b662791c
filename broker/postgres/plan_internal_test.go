package postgres

import (
	"testing"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
	bt "github.com/conveyor-dev/conveyor/broker/brokertest"
	"github.com/conveyor-dev/conveyor/internal/pgtest"
)

// TestEngineRunsWithoutJIT: the engine's connections run with jit off
// (plan.go says why), and a transaction that turned a planner method off
// has it off for its statements.
func TestEngineRunsWithoutJIT(t *testing.T) {
	t.Parallel()
	e, _ := openNode(t, pgtest.Schema(t, t.Name()))
	var jit string
	if err := e.pool.QueryRow(t.Context(), "SHOW jit").Scan(&jit); err != nil || jit != "off" {
		t.Fatalf("jit is %q (%v) on the engine's connections, want off", jit, err)
	}
	err := e.inTx(t.Context(), func(tx *txn) error {
		tx.planWithout(planSort)
		tx.planWithout(planSort) // once is enough: sent once
		var sort string
		if err := tx.queryRow(t.Context(), "SHOW enable_sort").Scan(&sort); err != nil {
			return err
		}
		if sort != "off" {
			t.Errorf("enable_sort is %q after planWithout(planSort), want off", sort)
		}
		if len(tx.tx.ahead) != 0 {
			t.Errorf("%d statements still wait to go ahead", len(tx.tx.ahead))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestBatchedCompletionsTakeTheGenericPlan: the statement that completes
// a batch of plain tasks, and the lease's, are planned once per
// connection, whatever the size of their batches (plan.go says why), and
// the transaction's later statements plan as usual.
func TestBatchedCompletionsTakeTheGenericPlan(t *testing.T) {
	t.Parallel()
	e, err := Open(t.Context(), Config{URL: pgtest.URL(t), Schema: pgtest.Schema(t, t.Name()), MaxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	const rounds = 8 // past the five custom plans PostgreSQL tries first
	for range rounds {
		now := time.Now()
		enqueueAt(t, e, now, bt.NewTask("q"), bt.NewTask("q"))
		ls, err := e.Lease(t.Context(), broker.LeaseParams{SessionID: "s", Now: now, TTL: time.Hour,
			Picks: []broker.QueuePick{{Queue: "q", N: 2}}})
		if err != nil || len(ls) != 2 {
			t.Fatalf("Lease: %d leases, %v", len(ls), err)
		}
		ds := make([]broker.Decision, len(ls))
		for i, l := range ls {
			ds[i] = broker.Decision{Kind: broker.DecideComplete, Verdict: true, SessionID: "s", Now: now,
				Lease: broker.LeaseRef{TaskID: l.Task.ID, Token: l.Token}}
		}
		res, err := e.CompleteBatch(t.Context(), ds)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			if r.Err != nil || r.State != broker.StateCompleted {
				t.Fatalf("completion %d: %v, %v; want COMPLETED", i, r.State, r.Err)
			}
		}
	}
	var generic, custom int64
	err = e.pool.QueryRow(t.Context(), `SELECT generic_plans, custom_plans FROM pg_prepared_statements
		WHERE statement LIKE 'WITH d AS (%UPDATE conveyor_tasks t SET state = 5%'`).Scan(&generic, &custom)
	if err != nil {
		t.Fatalf("the batched completion's prepared statement: %v", err)
	}
	if custom != 0 || generic != rounds+1 { // and once when Open warmed the connection (warm.go)
		t.Fatalf("the batched completion was planned for its arguments %d times and ran its generic plan %d times, want 0 and %d",
			custom, generic, rounds+1)
	}
	err = e.pool.QueryRow(t.Context(), `SELECT coalesce(sum(generic_plans), 0), coalesce(sum(custom_plans), 0)
		FROM pg_prepared_statements WHERE statement LIKE 'WITH picked AS (%'`).Scan(&generic, &custom)
	if err != nil {
		t.Fatalf("the leases' prepared statements: %v", err)
	}
	if custom != 0 || generic < rounds {
		t.Fatalf("the leases were planned for their arguments %d times and ran their generic plans %d times, want 0 and %d or more",
			custom, generic, rounds)
	}

	err = e.inTx(t.Context(), func(tx *txn) error {
		for _, step := range []struct {
			apply func()
			want  string
		}{{tx.planGenerically, "force_generic_plan"}, {tx.planAsUsual, "auto"}, {tx.planAsUsual, "auto"}} {
			step.apply()
			var mode string
			if err := tx.queryRow(t.Context(), "SHOW plan_cache_mode").Scan(&mode); err != nil {
				return err
			}
			if mode != step.want {
				t.Errorf("plan_cache_mode is %q, want %q", mode, step.want)
			}
		}
		if len(tx.tx.ahead) != 0 {
			t.Errorf("%d statements still wait to go ahead", len(tx.tx.ahead))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
