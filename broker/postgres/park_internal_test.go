package postgres

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
	bt "github.com/conveyor-dev/conveyor/broker/brokertest"
	"github.com/conveyor-dev/conveyor/internal/pgtest"
	"github.com/conveyor-dev/conveyor/internal/testwait"
)

// parkedOn parks a lease of session on queue with route, and returns it
// and a channel that receives each time a claim on it settles.
func parkedOn(e *Engine, session, queue string, route broker.Route) (*broker.ParkedLease, chan struct{}) {
	granted := make(chan struct{}, 16)
	pl := broker.NewParkedLease(broker.LeaseParams{SessionID: session, Picks: []broker.QueuePick{{Queue: queue}},
		TTL: time.Hour, Route: route}, func() { granted <- struct{}{} })
	e.ParkLease(pl)
	return pl, granted
}

// settledClaims counts the claims settled so far.
func settledClaims(ch chan struct{}) int {
	n := 0
	for {
		select {
		case <-ch:
			n++
		default:
			return n
		}
	}
}

// newQueue makes queue's hints (a queue is known from its first task's
// commit on) and leaves it empty.
func newQueue(t *testing.T, e *Engine, queue string, now time.Time) {
	t.Helper()
	enqueueAt(t, e, now, bt.NewTask(queue))
	lease(t, e, "setup", queue)
}

// TestEnqueueLeasesToAParkedLease: an enqueue of ready tasks claims as
// many of a parked lease's open slots as it has tasks (no more than are
// open), and leases them in its own transaction, first in line first,
// before it returns. The tasks left ready are counted so by the hints;
// a hand-over of them all signals nobody. A lease with no open slot, one
// whose route takes none of the tasks, a paused queue and a closed lease
// claim nothing; a failed enqueue settles its claim with no leases.
func TestEnqueueLeasesToAParkedLease(t *testing.T) {
	t.Parallel()
	e, note := openNode(t, pgtest.Schema(t, t.Name()))
	ctx := t.Context()
	now := time.Now()
	newQueue(t, e, "q", now)
	pl, granted := parkedOn(e, "s1", "q", broker.Route{})
	if kept, claimed := pl.Offer(3, 0, 7); kept != 0 || claimed != 0 {
		t.Fatalf("Offer(3, 0) kept %d, claims hold %d; want 0, 0", kept, claimed)
	}
	ids := func(ls []broker.Lease) []string {
		var out []string
		for _, l := range ls {
			out = append(out, l.Task.ID)
		}
		return out
	}
	// collect checks that one claim settled before its enqueue returned,
	// marked mark, and returns the IDs it leased.
	collect := func(what string, mark uint64) []string {
		t.Helper()
		if n := settledClaims(granted); n != 1 {
			t.Fatalf("%s: %d claims settled when the enqueue returned, want 1", what, n)
		}
		leases, m := pl.Collect()
		if m != mark {
			t.Fatalf("%s: the claim's mark is %d, want %d", what, m, mark)
		}
		return ids(leases)
	}
	signaled := func() int { return note.readyCount("q") }

	// Two tasks, three slots open: both go, and nobody is signaled.
	signals := signaled()
	first := enqueueAt(t, e, now, bt.NewTask("q"), bt.NewTask("q"))
	if got, want := collect("two tasks", 7), []string{first[0].ID, first[1].ID}; !slices.Equal(got, want) {
		t.Fatalf("the claim leased %v, want %v", got, want)
	}
	if n := readyOn(e, "q"); n != 0 {
		t.Fatalf("Ready counts %d after every task was handed over", n)
	}
	if n := signaled() - signals; n != 0 {
		t.Fatalf("an enqueue whose tasks all went to a parked lease signaled TasksReady %d times", n)
	}

	// Three tasks, one slot open: the first goes, in the enqueue's own
	// transaction; the other two are ready, and signaled.
	second := enqueueAt(t, e, now, bt.NewTask("q"), bt.NewTask("q"), bt.NewTask("q"))
	if got := collect("three tasks", 7); !slices.Equal(got, []string{second[0].ID}) {
		t.Fatalf("the claim leased %v, want the first task %s", got, second[0].ID)
	}
	var xids []string
	for i, task := range second {
		var state int
		var session *string
		var xid string
		if err := e.pool.QueryRow(ctx, `SELECT state, lease_session, xmin::text FROM conveyor_tasks WHERE id = $1`,
			task.ID).Scan(&state, &session, &xid); err != nil {
			t.Fatal(err)
		}
		if i == 0 && (state != 3 || session == nil || *session != "s1") || i > 0 && state != 2 {
			t.Fatalf("task %d: state %d, session %v", i, state, session)
		}
		xids = append(xids, xid)
	}
	if len(slices.Compact(xids)) != 1 {
		t.Fatalf("the tasks were last written by transactions %v: want the enqueue's alone", xids)
	}
	if n := readyOn(e, "q"); n != 2 {
		t.Fatalf("Ready counts %d tasks, want the 2 not claimed", n)
	}
	if n := signaled() - signals; n != 1 {
		t.Fatalf("TasksReady signaled %d times for the tasks left ready, want 1", n)
	}

	// No slot open: nothing is claimed. Nor is a lease whose route
	// takes none of the tasks.
	enqueueAt(t, e, now, bt.NewTask("q"))
	if n := settledClaims(granted); n != 0 {
		t.Fatalf("an enqueue claimed from a lease with no open slot (%d claims)", n)
	}
	other, otherGranted := parkedOn(e, "s2", "q", broker.Route{Types: []string{"other"}})
	other.Offer(5, 0, 1)
	enqueueAt(t, e, now, bt.NewTask("q"))
	if n := settledClaims(otherGranted); n != 0 {
		t.Fatalf("a lease whose route takes none of the tasks was claimed (%d claims)", n)
	}

	// A paused queue claims nothing.
	pl.Offer(10, 0, 8)
	if _, err := e.SetQueuePaused(ctx, "q", true); err != nil {
		t.Fatal(err)
	}
	enqueueAt(t, e, now, bt.NewTask("q"))
	if n := settledClaims(granted); n != 0 {
		t.Fatalf("an enqueue on a paused queue claimed %d times", n)
	}
	if _, err := e.SetQueuePaused(ctx, "q", false); err != nil {
		t.Fatal(err)
	}

	// A failed enqueue settles its claim with nothing.
	bad := bt.NewTask("q")
	bad.Priority = 0
	before := readyOn(e, "q")
	if _, err := e.EnqueueTx(ctx, broker.EnqueueParams{Now: now, Tasks: bt.WithStates([]broker.NewTask{bt.NewTask("q"), bad}, now)}); err == nil {
		t.Fatal("EnqueueTx with a priority off the scale succeeded")
	}
	if got := collect("a failed enqueue", 8); len(got) != 0 {
		t.Fatalf("a failed enqueue granted %v", got)
	}
	if n := readyOn(e, "q"); n != before {
		t.Fatalf("Ready went from %d to %d over a failed enqueue", before, n)
	}

	// A closed lease is claimed no more, and dropped once unparked.
	if left := pl.Close(); len(left) != 0 {
		t.Fatalf("Close returned %d leases, none were left", len(left))
	}
	enqueueAt(t, e, now, bt.NewTask("q"))
	if n := settledClaims(granted); n != 0 {
		t.Fatalf("a closed lease was claimed %d times", n)
	}
	e.UnparkLease(pl)
	e.UnparkLease(other)
	e.parked.mu.Lock()
	defer e.parked.mu.Unlock()
	if n := len(e.parked.byQueue); n != 0 {
		t.Fatalf("%d queues still hold parked leases after both were unparked", n)
	}
}

// TestCloseWaitsForTheClaimsInFlight: a session that closes its lease
// while an enqueue's transaction holds a claim gets that claim's leases
// from Close, to hand back.
func TestCloseWaitsForTheClaimsInFlight(t *testing.T) {
	t.Parallel()
	e, _ := openNode(t, pgtest.Schema(t, t.Name()))
	now := time.Now()
	newQueue(t, e, "q", now)
	pl, _ := parkedOn(e, "s1", "q", broker.Route{})
	pl.Offer(4, 0, 1)
	e.lapses.Lock() // the enqueue's claim waits for it, in flight
	done := make(chan []*broker.Task, 1)
	go func() {
		res, err := e.Enqueue(context.Background(), broker.EnqueueParams{Now: now, Tasks: bt.WithStates([]broker.NewTask{bt.NewTask("q")}, now)})
		if err != nil || res[0].Err != nil {
			t.Errorf("enqueue: %v", err)
		}
		done <- []*broker.Task{res[0].Task}
	}()
	waitClaimed(t, pl, 1)
	closed := make(chan []broker.Lease, 1)
	go func() { closed <- pl.Close() }()
	select {
	case <-closed:
		t.Fatal("Close returned while a claim was in flight")
	case <-time.After(50 * time.Millisecond):
	}
	e.lapses.Unlock()
	left := <-closed
	task := (<-done)[0]
	if len(left) != 1 || left[0].Task.ID != task.ID {
		t.Fatalf("Close returned %d leases; want the claim's lease of %s", len(left), task.ID)
	}
}

// waitClaimed waits until claims hold n of pl's slots (an Offer of
// nothing kept leaves what is open as it was).
func waitClaimed(t *testing.T, pl *broker.ParkedLease, n int) {
	t.Helper()
	testwait.Until(t, 30*time.Second, "the enqueue's claim", func() bool {
		_, claimed := pl.Offer(4, 0, 1)
		return claimed == n
	})
}

// TestEnqueueOutlivesItsLeaseFailing: when the lease an enqueue runs for
// a parked session fails (here its route names a type that is not UTF-8,
// which no wire message carries, and the database refuses), the claim
// settles with nothing and the
// tasks are enqueued all the same, ready for the usual lease.
func TestEnqueueOutlivesItsLeaseFailing(t *testing.T) {
	t.Parallel()
	e, _ := openNode(t, pgtest.Schema(t, t.Name()))
	now := time.Now()
	newQueue(t, e, "q", now)
	pl, granted := parkedOn(e, "s1", "q", broker.Route{Types: []string{"test", "bad\xfftype"}})
	pl.Offer(4, 0, 1)
	tasks := enqueueAt(t, e, now, bt.NewTask("q"), bt.NewTask("q"))
	if n := settledClaims(granted); n != 1 {
		t.Fatalf("claims settled: %d, want 1", n)
	}
	if leases, _ := pl.Collect(); len(leases) != 0 {
		t.Fatalf("the failed lease granted %d", len(leases))
	}
	for _, task := range tasks {
		got, err := e.GetTask(t.Context(), task.ID)
		if err != nil || got.State != broker.StatePending {
			t.Fatalf("task %s after its enqueue's lease failed: %v, %v; want it PENDING", task.ID, got, err)
		}
	}
	if n := readyOn(e, "q"); n != 2 {
		t.Fatalf("Ready counts %d, want the 2 tasks", n)
	}
}
