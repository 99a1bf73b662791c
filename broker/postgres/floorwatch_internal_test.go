package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
	bt "github.com/conveyor-dev/conveyor/broker/brokertest"
	"github.com/conveyor-dev/conveyor/internal/pgtest"
)

// floorsOf reads the floor a walk by route goes by for priority 4 of the
// queue q: the typed walk's kind "test", else the queue's.
func floorsOf(e *Engine, route broker.Route) int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	q := e.hints.queues["q"]
	if route.Types != nil {
		if f := q.kindFloors[broker.Kind{Type: "test"}]; f != nil {
			return f[4]
		}
		return 0
	}
	return q.floors[4]
}

// lateTask holds a transaction open that made a task of q ready, after
// this node's leases were given ready_seq base: it draws a ready_seq
// above base, and commits when commit is closed. It returns the task's
// id and ready_seq, and a channel the transaction's end is sent on.
func lateTask(t *testing.T, e *Engine, commit <-chan struct{}) (string, int64, <-chan error) {
	t.Helper()
	type drawn struct {
		id  string
		seq int64
	}
	got, done := make(chan drawn, 1), make(chan error, 1)
	go func() {
		done <- e.inTx(context.WithoutCancel(t.Context()), func(tx *txn) error {
			now := time.Now().UnixNano()
			items := e.prepare(bt.WithStates([]broker.NewTask{bt.NewTask("q")}, time.Unix(0, now)), now)
			if err := tx.insertItems(t.Context(), items, now, false); err != nil {
				return err
			}
			var seq int64
			if err := tx.queryRow(t.Context(), `SELECT ready_seq FROM conveyor_tasks WHERE id = $1`, items[0].id).Scan(&seq); err != nil {
				return err
			}
			got <- drawn{items[0].id, seq}
			<-commit
			return nil
		})
	}()
	select {
	case d := <-got:
		return d.id, d.seq, done
	case err := <-done:
		t.Fatalf("the late transaction: %v", err)
	}
	return "", 0, nil
}

// TestLateCommitCapsTheFloors: a transaction that draws a task's ready_seq,
// then commits after a lease took a task with a higher one and raised the
// floors past it, caps the floors below its task when it commits, so that
// the next lease's walk from the floors finds it. Whether the lease that
// raised them committed before (the floors are capped) or after (its raise
// is), and for each kind of walk that goes by floors (route.go).
func TestLateCommitCapsTheFloors(t *testing.T) {
	t.Parallel()
	routes := map[string]broker.Route{
		"open":  {StartAuthorization: true},
		"typed": {Types: []string{"test"}},
	}
	for name, route := range routes {
		for _, leaseFirst := range []bool{true, false} {
			sub := name + ", the lease commits first"
			if !leaseFirst {
				sub = name + ", the lease commits last"
			}
			t.Run(sub, func(t *testing.T) {
				t.Parallel()
				lateCommit(t, route, leaseFirst)
			})
		}
	}
}

func lateCommit(t *testing.T, route broker.Route, leaseFirst bool) {
	schema := pgtest.Schema(t, t.Name())
	e, _ := openNode(t, schema)
	enqueue := func() string {
		t.Helper()
		now := time.Now()
		res, err := e.Enqueue(t.Context(), broker.EnqueueParams{Now: now, Tasks: bt.WithStates([]broker.NewTask{bt.NewTask("q")}, now)})
		if err != nil || res[0].Err != nil {
			t.Fatalf("enqueue: %v %v", err, res)
		}
		return res[0].Task.ID
	}
	lease := func(n int) []string {
		t.Helper()
		ls, err := e.Lease(t.Context(), broker.LeaseParams{SessionID: "s", Now: time.Now(), TTL: time.Minute,
			Picks: []broker.QueuePick{{Queue: "q", N: n}}, Route: route})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, l := range ls {
			ids = append(ids, l.Task.ID)
		}
		return ids
	}
	enqueue()
	if ids := lease(1); len(ids) != 1 {
		t.Fatalf("the first lease took %v, want one task", ids)
	}
	base := floorsOf(e, route) // the first task's ready_seq + 1
	commit := make(chan struct{})
	late, lateSeq, done := lateTask(t, e, commit)
	after := enqueue()
	if leaseFirst {
		if ids := lease(1); len(ids) != 1 || ids[0] != after {
			t.Fatalf("leased %v, want %s, the task committed", ids, after)
		}
		if f := floorsOf(e, route); f <= lateSeq {
			t.Fatalf("the floor is %d after a lease past ready_seq %d, want it above", f, lateSeq)
		}
		close(commit)
	} else {
		// The lease walks (its snapshot without the late task) and then
		// waits for its commit while the late transaction commits.
		tx, err := e.begin(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now().UnixNano()
		l := leaseArgs{node: e.NodeID()}
		l.slots.add(0, "s", now, now+int64(time.Minute))
		got, err := tx.leaseReady(t.Context(), "q", 1, walkOf(route), l)
		if err != nil || len(got) != 1 || got[0].l.Task.ID != after {
			t.Fatalf("leaseReady: %v, %d rows, want %s", err, len(got), after)
		}
		close(commit)
		if err := <-done; err != nil {
			t.Fatalf("the late transaction: %v", err)
		}
		if err := tx.flush(t.Context()); err != nil {
			t.Fatal(err)
		}
		if err := e.commit(t.Context(), tx); err != nil {
			t.Fatal(err)
		}
		done = nil
	}
	if done != nil {
		if err := <-done; err != nil {
			t.Fatalf("the late transaction: %v", err)
		}
	}
	if f := floorsOf(e, route); f > lateSeq || f < base {
		t.Fatalf("the floor is %d once the task of ready_seq %d committed, want it capped at %d (the leases' ready_seq when it began, + 1)", f, lateSeq, base)
	}
	if ids := lease(10); len(ids) != 1 || ids[0] != late {
		t.Fatalf("leased %v, want the late task %s", ids, late)
	}
}
