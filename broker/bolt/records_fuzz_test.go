package bolt_test

import (
	"path/filepath"
	"testing"

	"github.com/oklog/ulid/v2"
	bbolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"

	"github.com/conveyor-dev/conveyor/broker"
	"github.com/conveyor-dev/conveyor/broker/bolt"
	bt "github.com/conveyor-dev/conveyor/broker/brokertest"
	storagev1 "github.com/conveyor-dev/conveyor/gen/conveyor/storage/v1"
)

// FuzzStoredRecords replaces one live task's records in a real file with
// fuzzed bytes and opens the engine on it. Open must either refuse the
// file with an error or open it; an opened engine must answer GetTask,
// Queues, Lease and Purge without panicking, and stay consistent.
//
//	go test ./broker/bolt -run '^$' -fuzz FuzzStoredRecords -fuzztime 30s
func FuzzStoredRecords(f *testing.F) {
	good := &storagev1.TaskStatus{State: 2, Queue: "q", Priority: 4, MaxRetry: 25, EnqueuedAt: 1, NextProcessAt: 1}
	spec := &storagev1.TaskSpec{Queue: "q", Type: "t", Payload: []byte("{}")}
	for _, st := range []*storagev1.TaskStatus{
		good,
		{State: 1, Queue: "q", Priority: 9, NextProcessAt: 1 << 62, UniqueKey: "u", ExpiresAt: 5},
		{State: 3, Queue: "q", Priority: 1, Retried: 3, MaxRetry: 2},
		{State: 99, Queue: "q", Priority: 4},
		{State: 2, Queue: "q", Priority: 200},
		{State: 9, Queue: "", Priority: 4},
	} {
		sb, _ := proto.Marshal(st)
		pb, _ := proto.Marshal(spec)
		f.Add(sb, pb)
	}
	f.Fuzz(func(t *testing.T, status, specBytes []byte) {
		path := filepath.Join(t.TempDir(), "conveyor.db")
		e, err := bolt.Open(bolt.Config{Path: path})
		if err != nil {
			t.Fatal(err)
		}
		task := bt.EnqueueOne(t, e, bt.T0, bt.NewTask("q"))
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
		k := ulid.MustParse(task.ID)
		db, err := bbolt.Open(path, 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		err = db.Update(func(tx *bbolt.Tx) error {
			if err := tx.Bucket([]byte("live")).Put(k[:], status); err != nil {
				return err
			}
			return tx.Bucket([]byte("tasks")).Put(k[:], specBytes)
		})
		if cerr := db.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			t.Fatal(err)
		}

		e, err = bolt.Open(bolt.Config{Path: path})
		if err != nil {
			return // refused, with an error: fine
		}
		defer func() {
			if err := e.Check(); err != nil {
				t.Errorf("consistency check: %v", err)
			}
			if err := e.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		}()
		_, _ = e.GetTask(t.Context(), task.ID)
		if _, err := e.Queues(t.Context()); err != nil {
			t.Fatalf("Queues: %v", err)
		}
		ls, _ := e.Lease(t.Context(), broker.LeaseParams{SessionID: "s", Picks: []broker.QueuePick{{Queue: "q", N: 1}}, Now: bt.T0, TTL: bt.TTL})
		for _, l := range ls {
			_, _ = e.Complete(t.Context(), decide("s", l, outcomeRetry, bt.T0))
		}
		_, _ = e.PromoteDue(t.Context(), bt.T0)
		_, _ = e.Purge(t.Context(), bt.PurgeAt(bt.T0))
	})
}
