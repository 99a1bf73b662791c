package bolt_test

import (
	"encoding/binary"
	"path/filepath"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
	bbolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/conveyor-dev/conveyor/broker"
	"github.com/conveyor-dev/conveyor/broker/bolt"
	bt "github.com/conveyor-dev/conveyor/broker/brokertest"
	storagev1 "github.com/conveyor-dev/conveyor/gen/conveyor/storage/v1"
)

// TestMigrateSchema1 opens a file as schema 1 wrote it (the timeout,
// deadline, retry policy and group only inside the stored options) and
// finds every one of them where schema 2 keeps them.
func TestMigrateSchema1(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "conveyor.db")
	e := openEngine(t, bolt.Config{Path: path})
	task := bt.EnqueueOne(t, e, bt.T0, bt.NewTask("q"))
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	deadline := bt.T0.Add(time.Hour)
	legacy, err := proto.Marshal(&storagev1.LegacyTaskOptions{
		Timeout:     durationpb.New(5 * time.Second),
		Deadline:    timestamppb.New(deadline),
		RetryPolicy: &storagev1.LegacyRetryPolicy{Strategy: int32(broker.RetryFixed), Base: durationpb.New(7 * time.Second)},
	})
	if err != nil {
		t.Fatal(err)
	}
	rewriteAsSchema1(t, path, ulid.MustParse(task.ID), legacy)

	e = openEngine(t, bolt.Config{Path: path})
	l := bt.LeaseOne(t, e, "s1", "q", bt.T0)
	if l.Task.Timeout != 5*time.Second || !l.Task.Deadline.Equal(deadline) ||
		l.Task.RetryPolicy == nil || *l.Task.RetryPolicy != (broker.RetryPolicy{Strategy: broker.RetryFixed, Base: 7 * time.Second}) {
		t.Fatalf("after the migration the task has timeout %v, deadline %v, policy %+v", l.Task.Timeout, l.Task.Deadline, l.Task.RetryPolicy)
	}
	if string(l.Task.Options) != string(legacy) {
		t.Fatal("the migration changed the stored options")
	}
}

// rewriteAsSchema1 makes the file at path look as schema 1 left it: the
// schema number 1, and task k's spec with only the given options.
func rewriteAsSchema1(t *testing.T, path string, k ulid.ULID, options []byte) {
	t.Helper()
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}()
	err = db.Update(func(tx *bbolt.Tx) error {
		var v [8]byte
		binary.BigEndian.PutUint64(v[:], 1)
		if err := tx.Bucket([]byte("meta")).Put([]byte("schema"), v[:]); err != nil {
			return err
		}
		specs := tx.Bucket([]byte("tasks"))
		var spec storagev1.TaskSpec
		if err := proto.Unmarshal(specs.Get(k[:]), &spec); err != nil {
			return err
		}
		spec.Options, spec.Timeout, spec.Deadline, spec.RetryPolicy = options, 0, 0, nil
		b, err := proto.Marshal(&spec)
		if err != nil {
			return err
		}
		return specs.Put(k[:], b)
	})
	if err != nil {
		t.Fatal(err)
	}
}
