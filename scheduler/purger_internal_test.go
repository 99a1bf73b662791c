package scheduler

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
	"github.com/conveyor-dev/conveyor/broker/bolt"
	bt "github.com/conveyor-dev/conveyor/broker/brokertest"
)

// TestPurgeRestsBetweenPurges: a purge that found less than a batch is
// followed by the next no sooner than PurgeInterval later, however early
// the next task comes due or a timer signal wakes the loop; then the task
// goes. A purge that filled its batch goes on at once.
func TestPurgeRestsBetweenPurges(t *testing.T) {
	t.Parallel()
	b, err := bolt.Open(bolt.Config{Path: filepath.Join(t.TempDir(), "conveyor.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	t0 := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
	keep := 10 * time.Millisecond
	completed := func(at time.Time) string {
		nt := bt.NewTask("q")
		nt.Retention = &keep
		task := bt.EnqueueOne(t, b, at, nt)
		bt.Succeed(t, b, "s", bt.LeaseOne(t, b, "s", "q", at), at)
		return task.ID
	}
	gone := func(id string) bool {
		_, err := b.GetTask(t.Context(), id)
		return errors.Is(err, broker.ErrNotFound)
	}
	first, second := completed(t0), completed(t0.Add(500*time.Millisecond))

	job := purgeJob(b, Retention{}, 0)
	at := t0.Add(20 * time.Millisecond)
	next, err := job(t.Context(), at)
	if err != nil || !gone(first) || gone(second) {
		t.Fatalf("the first purge: err %v, first gone %v, second gone %v; want only the first gone", err, gone(first), gone(second))
	}
	rest := at.Add(PurgeInterval)
	if !next.Equal(rest) {
		t.Fatalf("the first purge asks to run again at %v, want %v (the second task is due at %v, within the rest)",
			next, rest, t0.Add(510*time.Millisecond))
	}
	// A timer signal wakes the loop once the second is due, within the rest.
	if next, err := job(t.Context(), t0.Add(600*time.Millisecond)); err != nil || gone(second) || !next.Equal(rest) {
		t.Fatalf("a wake within the rest: err %v, second gone %v, next %v; want nothing purged, next %v", err, gone(second), next, rest)
	}
	if next, err := job(t.Context(), rest); err != nil || !gone(second) || !next.IsZero() {
		t.Fatalf("the purge after the rest: err %v, second gone %v, next %v; want it gone and nothing more due", err, gone(second), next)
	}

	// A wall clock stepped back an hour after a purge does not hold the
	// next one off for the hour.
	stepped := completed(t0.Add(2 * time.Second))
	at = t0.Add(3 * time.Second)
	if _, err := job(t.Context(), at); err != nil || !gone(stepped) {
		t.Fatalf("the purge before the step: err %v, gone %v", err, gone(stepped))
	}
	back := completed(at.Add(-time.Hour))
	if next, err := job(t.Context(), at.Add(-time.Hour+time.Second)); err != nil || !gone(back) || !next.IsZero() {
		t.Fatalf("the purge after the clock stepped back an hour: err %v, gone %v, next %v; want it gone", err, gone(back), next)
	}

	// A full batch: the next purge runs at once.
	batched := purgeJob(b, Retention{}, 1)
	third, fourth := completed(t0.Add(4*time.Second)), completed(t0.Add(4*time.Second))
	at = t0.Add(5 * time.Second)
	if next, err := batched(t.Context(), at); err != nil || !next.Equal(at) {
		t.Fatalf("a purge that filled its batch: err %v, next %v; want %v (at once)", err, next, at)
	}
	if next, err := batched(t.Context(), at); err != nil || !gone(third) || !gone(fourth) || !next.IsZero() {
		t.Fatalf("the purge after a full batch: err %v, gone %v %v, next %v; want both gone", err, gone(third), gone(fourth), next)
	}
}
