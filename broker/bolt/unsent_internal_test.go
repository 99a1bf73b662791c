package bolt

import (
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/conveyor-dev/conveyor/broker"
	bt "github.com/conveyor-dev/conveyor/broker/brokertest"
)

// breakSpec garbles a task's stored spec behind the engine's back, as a
// damaged file would: reading it fails after the task is leased. (A spec
// missing altogether is left out of the call instead; see
// TestLeaseLeavesOutATaskWithoutSpec.)
func breakSpec(t *testing.T, e *Engine, id string) {
	t.Helper()
	k, err := parseKey(id)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.db.Update(func(tx *bbolt.Tx) error { return tx.Bucket(bucketTasks).Put(k[:], []byte{0xff, 0xff}) }); err != nil {
		t.Fatal(err)
	}
}

// requireReleased checks that no task of queue q is ACTIVE or leased, and
// that the tasks ids are PENDING with no retry counted.
func requireReleased(t *testing.T, e *Engine, ids ...string) {
	t.Helper()
	if q := bt.Queue(t, e, "q"); q.Counts[broker.StateActive] != 0 || q.Counts[broker.StatePending] != int64(len(ids)) {
		t.Fatalf("counts after the failed call: %v, want the %d tasks pending", q.Counts, len(ids))
	}
	if lapsed, _, err := e.LapsedLeases(t.Context(), bt.T0.Add(time.Hour)); err != nil || len(lapsed) != 0 {
		t.Fatalf("LapsedLeases = %v, %v: leases nobody was told of", lapsed, err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, id := range ids {
		k, _ := parseKey(id)
		if m, _ := e.tasks.get(k); m.state != broker.StatePending || m.retried != 0 {
			t.Fatalf("task %s: state %v, retried %d; want pending, no retry counted", id, m.state, m.retried)
		}
	}
}

// TestLeaseReadErrorReleases checks that a Lease or LeaseGroups that fails
// reading a spec after granting its leases hands them all back (the
// session is never told of them) instead of leaving them to lapse.
func TestLeaseReadErrorReleases(t *testing.T) {
	t.Parallel()
	t.Run("Lease", func(t *testing.T) {
		t.Parallel()
		e := openTestEngine(t, Config{})
		ts := bt.Enqueue(t, e, bt.T0, bt.NewTask("q"), bt.NewTask("q"), bt.NewTask("q"))
		breakSpec(t, e, ts[1].ID)
		if ls, err := e.Lease(t.Context(), broker.LeaseParams{SessionID: "s", Picks: []broker.QueuePick{{Queue: "q", N: 3}}, Now: bt.T0, TTL: bt.TTL}); err == nil {
			t.Fatalf("Lease with a spec missing = %d leases, no error", len(ls))
		}
		requireReleased(t, e, ts[0].ID, ts[1].ID, ts[2].ID)
	})
	t.Run("LeaseGroups", func(t *testing.T) {
		t.Parallel()
		e := openTestEngine(t, Config{GroupDefaults: broker.GroupPolicy{MaxSize: 2, MaxDelay: time.Hour, GracePeriod: time.Hour}})
		member := func() broker.NewTask { nt := bt.NewTask("q"); nt.Group = "g"; return nt }
		ts := bt.Enqueue(t, e, bt.T0, member(), member(), member(), member()) // two groups of 2
		breakSpec(t, e, ts[3].ID)
		if gl, err := e.LeaseGroups(t.Context(), broker.GroupLeaseParams{SessionID: "s", Queue: "q", Types: []string{"test"}, N: 2, Now: bt.T0, TTL: bt.TTL}); err == nil {
			t.Fatalf("LeaseGroups with a spec missing = %d groups, no error", len(gl))
		}
		requireReleased(t, e, ts[0].ID, ts[1].ID, ts[2].ID, ts[3].ID)
	})
}
