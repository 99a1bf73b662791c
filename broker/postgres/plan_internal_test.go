package postgres

import (
	"testing"

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
