package bolt

import (
	"bytes"
	"context"
	"fmt"

	bbolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/conveyor-dev/conveyor/broker"
	storagev1 "github.com/conveyor-dev/conveyor/gen/conveyor/storage/v1"
)

// GetTask returns a task by id; see broker.Broker. It first waits for the
// changes already decided to become durable, so a caller reads its own
// writes (and those of every call that returned before it).
func (e *Engine) GetTask(ctx context.Context, id string) (*broker.Task, error) {
	k, err := parseKey(id)
	if err != nil {
		return nil, err
	}
	if err := e.Sync(ctx); err != nil {
		return nil, err
	}
	var t *broker.Task
	err = e.view(func(tx *bbolt.Tx) error {
		sv := tx.Bucket(bucketTasks).Get(k[:])
		if sv == nil {
			return fmt.Errorf("task %s: %w", id, broker.ErrNotFound)
		}
		stv := tx.Bucket(bucketLive).Get(k[:])
		if stv == nil {
			stv = tx.Bucket(bucketDone).Get(k[:])
		}
		if stv == nil {
			return fmt.Errorf("task %s has no status record: %w", id, broker.ErrNotFound)
		}
		spec := &storagev1.TaskSpec{}
		st := &storagev1.TaskStatus{}
		if err := proto.Unmarshal(sv, spec); err != nil {
			return fmt.Errorf("spec of %s: %w", id, err)
		}
		if err := proto.Unmarshal(stv, st); err != nil {
			return fmt.Errorf("status of %s: %w", id, err)
		}
		t = taskFrom(k, spec, st)
		fillLinks(tx, k, t)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if t.State == stateActive {
		e.mu.Lock()
		if l := e.leases[k]; l != nil {
			t.SessionID, t.LeaseToken = l.session, l.token
		}
		e.mu.Unlock()
	}
	return t, nil
}

// fillLinks sets the states of a task's dependencies and lists its
// dependents, from the file (which GetTask has synced).
func fillLinks(tx *bbolt.Tx, k key, t *broker.Task) {
	for i, d := range t.DependsOn {
		if dk, err := parseKey(d.TaskID); err == nil {
			t.DependsOn[i].State = storedState(tx, dk)
		}
	}
	c := tx.Bucket(bucketDependents).Cursor()
	for kb, _ := c.Seek(k[:]); kb != nil && bytes.HasPrefix(kb, k[:]) && len(t.Dependents) < broker.MaxDependentsShown; kb, _ = c.Next() {
		var dk key
		copy(dk[:], kb[len(k):])
		// The edge outlives a dependent deleted while it waited; a later
		// task given its id by its producer is listed only if it, too,
		// depends on k.
		if !dependsOn(tx.Bucket(bucketTasks).Get(dk[:]), k) {
			continue
		}
		if s := storedState(tx, dk); s != 0 {
			t.Dependents = append(t.Dependents, broker.TaskLink{TaskID: dk.String(), State: s})
		}
	}
}

// dependsOn reports whether the stored spec lists dependency k, reading
// only its depends_on fields (the payload may be a megabyte).
func dependsOn(spec []byte, k key) bool {
	for len(spec) > 0 {
		num, typ, value, n := splitField(spec)
		if n < 0 {
			return false
		}
		spec = spec[n:]
		if num != specDependsOnField || typ != protowire.BytesType {
			continue
		}
		rec, _ := protowire.ConsumeBytes(value) // whole: splitField read it
		var d storagev1.DependencyRecord
		if proto.Unmarshal(rec, &d) == nil && bytes.Equal(d.GetTaskId(), k[:]) {
			return true
		}
	}
	return false
}

// specDependsOnField is TaskSpec.depends_on's field number.
var specDependsOnField = fieldNumbers(&storagev1.TaskSpec{}, "depends_on")[0]

// storedState is a task's state in the file, 0 when it is gone.
func storedState(tx *bbolt.Tx, k key) broker.State {
	v := tx.Bucket(bucketLive).Get(k[:])
	if v == nil {
		v = tx.Bucket(bucketDone).Get(k[:])
	}
	if v == nil {
		return 0
	}
	var st storagev1.TaskStatus
	if proto.Unmarshal(v, &st) != nil {
		return 0
	}
	return stateOf(&st)
}
