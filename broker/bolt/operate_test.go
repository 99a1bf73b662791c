package bolt_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
	bbolt "go.etcd.io/bbolt"

	"google.golang.org/protobuf/proto"

	"github.com/conveyor-dev/conveyor/broker"
	"github.com/conveyor-dev/conveyor/broker/bolt"
	bt "github.com/conveyor-dev/conveyor/broker/brokertest"
	storagev1 "github.com/conveyor-dev/conveyor/gen/conveyor/storage/v1"
	"github.com/conveyor-dev/conveyor/internal/testwait"
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

// TestLeaseGroupsWithoutSpecs: a fired group whose every member lost its
// spec is not handed out as an empty batch (it would hold a session slot
// that no Result can free).
func TestLeaseGroupsWithoutSpecs(t *testing.T) {
	path := filepath.Join(t.TempDir(), "conveyor.db")
	e := openEngine(t, bolt.Config{Path: path})
	group := broker.GroupPolicy{MaxSize: 2, MaxDelay: time.Hour, GracePeriod: time.Hour}
	if _, err := e.UpdateQueueConfig(t.Context(), "q", func(c *broker.QueueConfig) { c.Group = group }); err != nil {
		t.Fatal(err)
	}
	member := bt.NewTask("q")
	member.Group, member.Type = "g", "t"
	tasks := bt.Enqueue(t, e, bt.T0, member, member) // fires by size
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		for _, task := range tasks {
			k := ulid.MustParse(task.ID)
			if err := tx.Bucket([]byte("tasks")).Delete(k[:]); err != nil {
				return err
			}
		}
		return nil
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	e = openEngine(t, bolt.Config{Path: path})
	gl, err := e.LeaseGroups(t.Context(), broker.GroupLeaseParams{SessionID: "s", Queue: "q", Types: []string{"t"}, N: 5, Now: bt.T0, TTL: bt.TTL})
	if err != nil || len(gl) != 0 {
		t.Fatalf("LeaseGroups = %+v, %v; want no batch for a group with no spec left", gl, err)
	}
}

// TestDeletedNotDurableIsGone: a task whose delete is decided but not yet
// durable no longer exists for an enqueue: a dependency on it is refused,
// and its id may be taken again (the new task's write follows the
// delete's in the file).
func TestDeletedNotDurableIsGone(t *testing.T) {
	var held atomic.Bool
	gate := make(chan struct{})
	cfg := bolt.Config{Path: filepath.Join(t.TempDir(), "conveyor.db")}
	bolt.SetCommitFault(&cfg, func() error {
		if held.Load() {
			<-gate
		}
		return nil
	})
	e := openEngine(t, cfg)
	id := bt.NewID()
	nt := bt.NewTask("q")
	nt.ID = id
	bt.EnqueueOne(t, e, bt.T0, nt)
	bt.Succeed(t, e, "s", bt.LeaseOne(t, e, "s", "q", bt.T0), bt.T0)
	if err := e.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}

	held.Store(true)
	deleted := make(chan error, 1)
	go func() {
		res, err := e.Act(context.Background(), broker.ActParams{Action: broker.ActionDelete, IDs: []string{id}, Now: bt.T0})
		if err == nil {
			err = res[0].Err
		}
		deleted <- err
	}()
	testwait.Until(t, 10*time.Second, "the delete decided", func() bool {
		return bt.Queue(t, e, "q").Counts[broker.StateCompleted] == 0
	})

	dependent := bt.NewTask("q")
	dependent.DependsOn = []broker.Dependency{{TaskID: id}}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	_, err := e.EnqueueTx(ctx, broker.EnqueueParams{Now: bt.T0, Tasks: bt.WithStates([]broker.NewTask{dependent}, bt.T0)})
	if !errors.Is(err, broker.ErrInvalidArgument) {
		t.Errorf("EnqueueTx depending on a deleted task: %v, want invalid_argument", err)
	}
	again := make(chan []broker.EnqueueResult, 1)
	go func() {
		res, _ := e.Enqueue(context.Background(), broker.EnqueueParams{Now: bt.T0, Tasks: bt.WithStates([]broker.NewTask{nt}, bt.T0)})
		again <- res
	}()

	held.Store(false)
	close(gate)
	if err := <-deleted; err != nil {
		t.Fatalf("delete: %v", err)
	}
	if res := <-again; len(res) != 1 || res[0].Err != nil {
		t.Fatalf("enqueue of the deleted task's id: %+v, want it stored", res)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e = openEngine(t, bolt.Config{Path: cfg.Path})
	bt.RequireState(t, e, id, broker.StatePending)
	bt.RequireCounts(t, e, "q", bt.Counts{broker.StatePending: 1})
}

// TestRunNowForgetsDependencies: a task run now by RunTask, from BLOCKED
// (live) or from CANCELED by a cascade (revived), no longer waits on its
// dependencies, and its stored status says so: no dependency left, none
// failed.
func TestRunNowForgetsDependencies(t *testing.T) {
	path := filepath.Join(t.TempDir(), "conveyor.db")
	e := openEngine(t, bolt.Config{Path: path})
	a, c := bt.EnqueueOne(t, e, bt.T0, bt.NewTask("deps")), bt.EnqueueOne(t, e, bt.T0, bt.NewTask("deps"))
	blocked := bt.NewTask("q")
	blocked.DependsOn = []broker.Dependency{{TaskID: a.ID, OnFailure: broker.OnFailureBlock}, {TaskID: c.ID}}
	canceled := bt.NewTask("q")
	canceled.DependsOn = []broker.Dependency{{TaskID: a.ID, OnFailure: broker.OnFailureCascadeCancel}, {TaskID: c.ID}}
	ids := []string{bt.EnqueueOne(t, e, bt.T0, blocked).ID, bt.EnqueueOne(t, e, bt.T0, canceled).ID}
	bt.Archive(t, e, "s", bt.LeaseOne(t, e, "s", "deps", bt.T0), "bad", bt.T0)
	bt.RequireState(t, e, ids[0], broker.StateBlocked)
	bt.RequireState(t, e, ids[1], broker.StateCanceled)
	res, err := e.Act(t.Context(), broker.ActParams{Action: broker.ActionRun, IDs: ids, Now: bt.T0})
	if err != nil || res[0].Err != nil || res[1].Err != nil {
		t.Fatalf("RunTask = %+v, %v", res, err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	err = db.View(func(tx *bbolt.Tx) error {
		for _, id := range ids {
			k := ulid.MustParse(id)
			var st storagev1.TaskStatus
			if err := proto.Unmarshal(tx.Bucket([]byte("live")).Get(k[:]), &st); err != nil {
				return err
			}
			if len(st.GetWaitingOn()) != 0 || st.GetDependencyFailed() {
				t.Errorf("task %s run now is stored waiting on %v, dependency failed %v", id, st.GetWaitingOn(), st.GetDependencyFailed())
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
