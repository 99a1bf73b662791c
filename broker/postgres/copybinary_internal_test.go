package postgres

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
	bt "github.com/conveyor-dev/conveyor/broker/brokertest"
	"github.com/conveyor-dev/conveyor/internal/pgtest"
)

// TestCopiedRowsMatchTheInsertedOnes: an enqueue of more than copyAbove
// tasks writes its rows with a binary COPY written by hand
// (copyRowsBuf); a smaller one with an INSERT whose values pgx encodes.
// The same tasks stored either way have the same columns, NULLs
// included, for every kind of value a new task can have.
func TestCopiedRowsMatchTheInsertedOnes(t *testing.T) {
	t.Parallel()
	e, _ := openNode(t, pgtest.Schema(t, t.Name()))
	now := bt.T0
	retention, policy := 90*time.Minute, &broker.RetryPolicy{Strategy: 1, Base: time.Second, Max: time.Hour}
	specs := func(queue string) []broker.NewTask {
		var out []broker.NewTask
		for i := range copyAbove + 8 {
			nt := bt.NewTask(queue)
			nt.Type = fmt.Sprintf("type-%d", i%3)
			nt.Priority, nt.MaxRetry = int32(1+i%9), int32(i)
			nt.Payload = []byte(strings.Repeat("é", i))
			if i%4 == 0 {
				nt.Payload = nil
			}
			if i%2 == 0 {
				nt.Metadata = map[string]string{"k": fmt.Sprint(i), "ünï": `"q"`}
				nt.Options = []byte{0, 1, 2, byte(i)}
			}
			if i%3 == 0 {
				nt.Options = []byte{}
				nt.ProcessAt = now.Add(time.Duration(i) * time.Minute)
				nt.ExpiresAt, nt.Deadline = now.Add(time.Hour), now.Add(2*time.Hour)
				nt.Timeout, nt.Retention, nt.RetryPolicy = time.Duration(i)*time.Second, &retention, policy
			}
			if i%5 == 0 {
				nt.UniqueKey, nt.UniqueUntil = fmt.Sprintf("%s-u%d", queue, i), now.Add(time.Hour)
				nt.ConcurrencyKey = "ck"
			}
			if i%7 == 1 {
				nt.AtMostOnce = true
			}
			out = append(out, nt)
		}
		return bt.WithStates(out, now)
	}
	enqueue := func(tasks []broker.NewTask) {
		t.Helper()
		res, err := e.Enqueue(context.Background(), broker.EnqueueParams{Now: now, Tasks: tasks})
		if err != nil {
			t.Fatalf("Enqueue: %v", err)
		}
		for i, r := range res {
			if r.Err != nil {
				t.Fatalf("Enqueue of item %d: %v", i, r.Err)
			}
		}
	}
	enqueue(specs("copied")) // one call, over copyAbove: COPY
	inserted := specs("inserted")
	for chunk := range slices.Chunk(inserted, copyAbove) {
		enqueue(chunk) // INSERT
	}

	// Every column the COPY fills but the id and the queue (the unique
	// key names its queue), as text, in the order of the specs (max_retry
	// numbers them).
	var cols []string
	for _, c := range newTaskColumns {
		switch c {
		case "id", "queue":
		case "unique_key":
			cols = append(cols, "replace(unique_key, queue, '')")
		default:
			cols = append(cols, c)
		}
	}
	rows := func(queue string) []string {
		t.Helper()
		rs, err := e.pool.Query(context.Background(), `SELECT row(`+strings.Join(cols, ", ")+`)::text
			FROM conveyor_tasks WHERE queue = $1 ORDER BY max_retry`, queue)
		if err != nil {
			t.Fatal(err)
		}
		defer rs.Close()
		var out []string
		for rs.Next() {
			var s string
			if err := rs.Scan(&s); err != nil {
				t.Fatal(err)
			}
			out = append(out, s)
		}
		return out
	}
	copied, ins := rows("copied"), rows("inserted")
	if len(copied) != copyAbove+8 || len(ins) != len(copied) {
		t.Fatalf("%d rows copied and %d inserted, want %d each", len(copied), len(ins), copyAbove+8)
	}
	for i := range copied {
		if copied[i] != ins[i] {
			t.Errorf("row %d copied:\n  %s\ninserted:\n  %s", i, copied[i], ins[i])
		}
	}
}
