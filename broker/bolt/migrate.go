package bolt

import (
	"encoding/binary"
	"fmt"
	"log/slog"

	"github.com/oklog/ulid/v2"
	bbolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"

	storagev1 "github.com/conveyor-dev/conveyor/gen/conveyor/storage/v1"
)

// migrateV1 brings a schema-1 file to schema 2, in the transaction that
// opens it. Schema 1 kept the producer's options as the only home of the
// timeout, deadline, retry policy, group, concurrency key and dependencies;
// schema 2 keeps each as a field of its own (the engine no longer reads the
// options). Only live tasks need them: a terminal task's fields are shown
// from its options. Purge entries of schema 1 carry their purge time and
// stay valid as they are.
func migrateV1(tx *bbolt.Tx, log *slog.Logger) error {
	specs, live := tx.Bucket(bucketTasks), tx.Bucket(bucketLive)
	var n int
	var spec storagev1.TaskSpec
	var st storagev1.TaskStatus
	var legacy storagev1.LegacyTaskOptions
	c := live.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		sv := specs.Get(k)
		if sv == nil {
			return fmt.Errorf("migrate %x: the spec is missing", k)
		}
		spec.Reset()
		st.Reset()
		legacy.Reset()
		if err := proto.Unmarshal(sv, &spec); err != nil {
			return fmt.Errorf("migrate %x: spec: %w", k, err)
		}
		if err := proto.Unmarshal(v, &st); err != nil {
			return fmt.Errorf("migrate %x: status: %w", k, err)
		}
		if err := proto.Unmarshal(spec.GetOptions(), &legacy); err != nil {
			return fmt.Errorf("migrate %x: options: %w", k, err)
		}
		spec.Timeout = int64(legacy.GetTimeout().AsDuration())
		if d := legacy.GetDeadline(); d != nil {
			spec.Deadline = nanos(d.AsTime())
			st.Deadline = spec.Deadline
		}
		if p := legacy.GetRetryPolicy(); p != nil {
			spec.RetryPolicy = &storagev1.RetryPolicyRecord{Strategy: p.GetStrategy(),
				Base: int64(p.GetBase().AsDuration()), Max: int64(p.GetMax().AsDuration())}
		}
		for _, d := range legacy.GetDependsOn() {
			if id, err := ulid.ParseStrict(d.GetTaskId()); err == nil {
				spec.DependsOn = append(spec.DependsOn, &storagev1.DependencyRecord{TaskId: id[:], OnFailure: d.GetOnFailure()})
			}
		}
		st.Group, st.ConcurrencyKey = legacy.GetGroup(), legacy.GetConcurrencyKey()
		st.Type = spec.GetType()
		if err := specs.Put(k, marshal(&spec)); err != nil {
			return err
		}
		if err := live.Put(k, marshal(&st)); err != nil {
			return err
		}
		if err := indexV1(tx, k, &st); err != nil {
			return err
		}
		n++
	}
	// Terminal tasks get their type and their listing-index entry.
	done := tx.Bucket(bucketDone)
	var terminal []*storagev1.TaskStatus
	var keys [][]byte
	dc := done.Cursor()
	for k, v := dc.First(); k != nil; k, v = dc.Next() {
		st := &storagev1.TaskStatus{}
		spec.Reset()
		if err := proto.Unmarshal(v, st); err != nil {
			return fmt.Errorf("migrate %x: status: %w", k, err)
		}
		if sv := specs.Get(k); sv != nil {
			if err := proto.Unmarshal(sv, &spec); err != nil {
				return fmt.Errorf("migrate %x: spec: %w", k, err)
			}
			st.Type = spec.GetType()
		}
		terminal = append(terminal, st)
		keys = append(keys, append([]byte(nil), k...))
	}
	for i, st := range terminal {
		if err := done.Put(keys[i], marshal(st)); err != nil {
			return err
		}
		if err := indexV1(tx, keys[i], st); err != nil {
			return err
		}
	}
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], 2)
	if err := tx.Bucket(bucketMeta).Put(keySchema, b[:]); err != nil {
		return err
	}
	log.Info("migrated the data file from schema 1 to 2", "live_tasks", n, "terminal_tasks", len(terminal))
	return nil
}

func indexV1(tx *bbolt.Tx, kb []byte, st *storagev1.TaskStatus) error {
	var k key
	copy(k[:], kb)
	return tx.Bucket(bucketIndex).Put(indexKey(st.GetQueue(), stateOf(st), st.GetType(), k), nil)
}
