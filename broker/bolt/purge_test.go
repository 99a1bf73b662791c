package bolt_test

import (
	"encoding/binary"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/conveyor-dev/conveyor/broker"
	"github.com/conveyor-dev/conveyor/broker/bolt"
	bt "github.com/conveyor-dev/conveyor/broker/brokertest"
)

// requirePurged fails unless GetTask reports the task gone.
func requirePurged(t *testing.T, e broker.Broker, id string) {
	t.Helper()
	if _, err := e.GetTask(t.Context(), id); !errors.Is(err, broker.ErrNotFound) {
		t.Fatalf("GetTask(%s) = %v, want ErrNotFound", id, err)
	}
}

func TestRetentionConfig(t *testing.T) {
	e := openEngine(t, bolt.Config{Retention: time.Hour, ArchiveRetention: 3 * time.Hour})
	T0 := bt.T0
	long := 5 * time.Hour
	own := bt.NewTask("q")
	own.Retention = &long
	ts := bt.Enqueue(t, e, T0, bt.NewTask("q"), bt.NewTask("q"), own)
	ls := bt.Lease(t, e, "s1", "q", 3, T0, bt.TTL)
	bt.Complete(t, e, "s1", ls[0], outcomeSuccess, "", T0)
	bt.Complete(t, e, "s1", ls[1], outcomeSkipRetry, "dead", T0)
	bt.Complete(t, e, "s1", ls[2], outcomeSuccess, "", T0)

	next, err := e.Purge(t.Context(), T0)
	if err != nil {
		t.Fatal(err)
	}
	if !next.Equal(T0.Add(time.Hour)) {
		t.Fatalf("Purge next = %v, want T0+1h (Config.Retention)", next)
	}
	// Completed: Config.Retention.
	if next, err = e.Purge(t.Context(), T0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	requirePurged(t, e, ts[0].ID)
	bt.RequireState(t, e, ts[1].ID, stateArchived)
	if !next.Equal(T0.Add(3 * time.Hour)) {
		t.Fatalf("Purge next = %v, want T0+3h (Config.ArchiveRetention)", next)
	}
	// Archived: Config.ArchiveRetention; the task's own retention is for
	// completed tasks and outlives both.
	if next, err = e.Purge(t.Context(), T0.Add(3*time.Hour)); err != nil {
		t.Fatal(err)
	}
	requirePurged(t, e, ts[1].ID)
	bt.RequireState(t, e, ts[2].ID, stateCompleted)
	if !next.Equal(T0.Add(long)) {
		t.Fatalf("Purge next = %v, want T0+5h (the task's own retention)", next)
	}
	if next, err = e.Purge(t.Context(), T0.Add(long)); err != nil || !next.IsZero() {
		t.Fatalf("last Purge = %v, %v; want zero next", next, err)
	}
	requirePurged(t, e, ts[2].ID)
	bt.RequireCounts(t, e, "q", bt.Counts{})
}

func TestPurgeBatchLimit(t *testing.T) {
	e := openEngine(t, bolt.Config{PurgeBatch: 2})
	zero := time.Duration(0)
	nt := bt.NewTask("q")
	nt.Retention = &zero
	batch := []broker.NewTask{nt, nt, nt, nt, nt}
	ts := bt.Enqueue(t, e, bt.T0, batch...)
	for _, l := range bt.Lease(t, e, "s1", "q", len(batch), bt.T0, bt.TTL) {
		bt.Complete(t, e, "s1", l, outcomeSuccess, "", bt.T0)
	}
	// Each call deletes at most two and says to come back at once.
	for _, left := range []int64{3, 1} {
		next, err := e.Purge(t.Context(), bt.T0)
		if err != nil {
			t.Fatal(err)
		}
		if next.IsZero() || next.After(bt.T0) {
			t.Fatalf("Purge with more due = %v, want a time no later than now", next)
		}
		bt.RequireCounts(t, e, "q", bt.Counts{stateCompleted: left})
	}
	if next, err := e.Purge(t.Context(), bt.T0); err != nil || !next.IsZero() {
		t.Fatalf("final Purge = %v, %v; want zero next", next, err)
	}
	for _, task := range ts {
		requirePurged(t, e, task.ID)
	}
}

func TestOpenRejectsNewerSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "conveyor.db")
	e, err := bolt.Open(bolt.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		var v [8]byte
		binary.BigEndian.PutUint64(v[:], 99)
		return tx.Bucket([]byte("meta")).Put([]byte("schema"), v[:])
	})
	if cerr := db.Close(); err != nil || cerr != nil {
		t.Fatal(err, cerr)
	}
	e, err = bolt.Open(bolt.Config{Path: path})
	if err == nil {
		_ = e.Close()
		t.Fatalf("Open of a file with schema version 99 succeeded")
	}
	if !strings.Contains(err.Error(), "schema version 99") {
		t.Fatalf("Open error %q does not name the schema version", err)
	}
}
