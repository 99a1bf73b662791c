package bolt_test

import (
	"path/filepath"
	"testing"

	"github.com/oklog/ulid/v2"
	bbolt "go.etcd.io/bbolt"

	"github.com/conveyor-dev/conveyor/broker/bolt"
	bt "github.com/conveyor-dev/conveyor/broker/brokertest"
)

// TestLeaseLeavesOutATaskWithoutSpec: a live task whose spec is missing
// from the file (damage) is left out of a Lease; the call's other tasks
// are still handed out.
func TestLeaseLeavesOutATaskWithoutSpec(t *testing.T) {
	path := filepath.Join(t.TempDir(), "conveyor.db")
	e := openEngine(t, bolt.Config{Path: path})
	tasks := bt.Enqueue(t, e, bt.T0, bt.NewTask("q"), bt.NewTask("q"), bt.NewTask("q"))
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	broken := ulid.MustParse(tasks[1].ID)
	err = db.Update(func(tx *bbolt.Tx) error { return tx.Bucket([]byte("tasks")).Delete(broken[:]) })
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	e = openEngine(t, bolt.Config{Path: path})
	ls := bt.Lease(t, e, "s", "q", 3, bt.T0, bt.TTL)
	if len(ls) != 2 || ls[0].Task.ID != tasks[0].ID || ls[1].Task.ID != tasks[2].ID {
		t.Fatalf("leased %d tasks (%v), want the two with specs, %s and %s", len(ls), ls, tasks[0].ID, tasks[2].ID)
	}
	for _, l := range ls {
		if len(l.Task.Payload) == 0 {
			t.Fatalf("task %s leased without its payload", l.Task.ID)
		}
	}
}
