package bolt_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/oklog/ulid/v2"
	bbolt "go.etcd.io/bbolt"

	"github.com/conveyor-dev/conveyor/broker"
	"github.com/conveyor-dev/conveyor/broker/bolt"
	bt "github.com/conveyor-dev/conveyor/broker/brokertest"
)

// reopenTasks is more than a few of the loader's chunks, with a partial
// one at the end.
const reopenTasks = 5_000 + 123

// fillAndClose stores reopenTasks pending tasks in a new file, priorities
// 1-9 in turn, and returns the path and the tasks in enqueue order.
func fillAndClose(t *testing.T) (string, []*broker.Task) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "conveyor.db")
	e, err := bolt.Open(bolt.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	var tasks []*broker.Task
	batch := make([]broker.NewTask, 0, 1000)
	for len(tasks) < reopenTasks {
		batch = batch[:0]
		for i := len(tasks); i < min(len(tasks)+1000, reopenTasks); i++ {
			nt := bt.NewTask("q")
			nt.Priority = int32(1 + i%9)
			batch = append(batch, nt)
		}
		tasks = append(tasks, bt.Enqueue(t, e, bt.T0, batch...)...)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	return path, tasks
}

// TestReopenKeepsEveryTaskInOrder reopens a file of several chunks: every
// task is back, and each priority's tasks are dispatched in enqueue order.
func TestReopenKeepsEveryTaskInOrder(t *testing.T) {
	path, tasks := fillAndClose(t)
	e := openEngine(t, bolt.Config{Path: path})
	if got := bt.Ready(e, "q"); got != reopenTasks {
		t.Fatalf("%d tasks ready after the reopen, want %d", got, reopenTasks)
	}
	var want []string // highest priority first, each in enqueue order
	for p := int32(9); p >= 1; p-- {
		for _, task := range tasks {
			if task.Priority == p {
				want = append(want, task.ID)
			}
		}
	}
	ls := bt.Lease(t, e, "s", "q", reopenTasks, bt.T0, bt.TTL)
	if len(ls) != len(want) {
		t.Fatalf("leased %d tasks, want %d", len(ls), len(want))
	}
	for i, l := range ls {
		if l.Task.ID != want[i] {
			t.Fatalf("lease %d is %s (priority %d), want %s", i, l.Task.ID, l.Task.Priority, want[i])
		}
	}
}

// TestReopenRefusesABadRecordDeepInTheFile damages one live record past the
// first chunks: Open fails and names that task.
func TestReopenRefusesABadRecordDeepInTheFile(t *testing.T) {
	path, tasks := fillAndClose(t)
	bad := tasks[4_321].ID
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	k := ulid.MustParse(bad)
	err = db.Update(func(tx *bbolt.Tx) error { return tx.Bucket([]byte("live")).Put(k[:], []byte{0xff, 0xff}) })
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	e, err := bolt.Open(bolt.Config{Path: path})
	if err == nil {
		_ = e.Close()
		t.Fatal("Open accepted a file with a damaged live record")
	}
	if !strings.Contains(err.Error(), bad) {
		t.Fatalf("Open: %v; want the error to name %s", err, bad)
	}
}
