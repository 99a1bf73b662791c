package bolt_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
	"github.com/conveyor-dev/conveyor/broker/bolt"
	bt "github.com/conveyor-dev/conveyor/broker/brokertest"
)

// diskFull is a commit fault that refuses commits while full is set, and
// signals each refusal on refused.
type diskFull struct {
	full    atomic.Bool
	refused chan struct{}
}

func newDiskFull() *diskFull { return &diskFull{refused: make(chan struct{}, 100)} }

// openDiskFull opens an engine on cfg whose commits d refuses while it is
// full.
func openDiskFull(tb testing.TB, cfg bolt.Config) (*bolt.Engine, *diskFull) {
	tb.Helper()
	d := newDiskFull()
	bolt.SetCommitFault(&cfg, d.fault)
	return openEngine(tb, cfg), d
}

func (d *diskFull) fault() error {
	if !d.full.Load() {
		return nil
	}
	select {
	case d.refused <- struct{}{}:
	default:
	}
	return syscall.ENOSPC
}

// waitRefusals waits for n refused commits.
func (d *diskFull) waitRefusals(t *testing.T, n int) {
	t.Helper()
	for range n {
		select {
		case <-d.refused:
		case <-time.After(20 * time.Second):
			t.Fatal("no commit was refused")
		}
	}
}

// TestFullDiskWaitsAndRecovers: while the storage refuses commits, an
// enqueue waits (bounded by its context) instead of failing or being
// lost, tasks already durable are still leased and completed, and once
// space returns the same batch commits: nothing decided is lost and no
// index is rebuilt.
func TestFullDiskWaitsAndRecovers(t *testing.T) {
	t.Parallel()
	e, d := openDiskFull(t, bolt.Config{})
	ready := bt.EnqueueOne(t, e, bt.T0, bt.NewTask("q"))

	d.full.Store(true)
	done := make(chan []broker.EnqueueResult, 1)
	go func() {
		res, _ := e.Enqueue(context.Background(), broker.EnqueueParams{Now: bt.T0, Tasks: bt.WithStates([]broker.NewTask{bt.NewTask("q")}, bt.T0)})
		done <- res
	}()
	d.waitRefusals(t, 2) // the first commit and one retry of the same batch
	select {
	case res := <-done:
		t.Fatalf("Enqueue returned %v while the disk was full", res)
	default:
	}
	if !errors.Is(e.StorageError(), syscall.ENOSPC) {
		t.Fatalf("StorageError = %v, want ENOSPC", e.StorageError())
	}
	// A context that ends first gets its error: the task is in doubt.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := e.Enqueue(ctx, broker.EnqueueParams{Now: bt.T0, Tasks: bt.WithStates([]broker.NewTask{bt.NewTask("q")}, bt.T0)}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Enqueue with a deadline while the disk is full: %v, want DeadlineExceeded", err)
	}
	// Dispatch from what is durable goes on.
	l := bt.LeaseOne(t, e, "s1", "q", bt.T0)
	if l.Task.ID != ready.ID {
		t.Fatalf("leased %s, want the durable task %s", l.Task.ID, ready.ID)
	}
	bt.Succeed(t, e, "s1", l, bt.T0)

	d.full.Store(false)
	select {
	case res := <-done:
		if res[0].Err != nil {
			t.Fatalf("Enqueue after space returned: %v", res[0].Err)
		}
		bt.RequireState(t, e, res[0].Task.ID, broker.StatePending)
	case <-time.After(20 * time.Second):
		t.Fatal("Enqueue still waiting after space returned")
	}
	if err := e.StorageError(); err != nil {
		t.Fatalf("StorageError after recovery = %v", err)
	}
	bt.RequireState(t, e, ready.ID, broker.StateCompleted)
	bt.RequireCounts(t, e, "q", bt.Counts{broker.StatePending: 2, broker.StateCompleted: 1})
}

// TestCloseWhileDiskFull: Close does not hang on a storage that keeps
// refusing; what was not durable is reported failed to its waiters.
func TestCloseWhileDiskFull(t *testing.T) {
	t.Parallel()
	e, d := openDiskFull(t, bolt.Config{})
	d.full.Store(true)
	done := make(chan error, 1)
	go func() {
		_, err := e.Enqueue(context.Background(), broker.EnqueueParams{Now: bt.T0, Tasks: bt.WithStates([]broker.NewTask{bt.NewTask("q")}, bt.T0)})
		done <- err
	}()
	d.waitRefusals(t, 1)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err == nil {
		t.Fatal("Enqueue succeeded although its commit never did")
	}
	d.full.Store(false) // let the cleanup's consistency check reopen the file
}

// storageFailureTasks is how many tasks BenchmarkStorageFailure stores.
const storageFailureTasks = 1_000_000

// BenchmarkStorageFailure measures what a full disk costs a store of a
// million pending tasks: lease+complete round trips while every commit
// is refused, next to the same with a healthy disk, and the reload that
// an engine rebuilding its indexes after each failed commit would pay.
//
//	go test ./broker/bolt -run '^$' -bench StorageFailure -benchtime 20000x
func BenchmarkStorageFailure(b *testing.B) {
	cfg := bolt.Config{Path: b.TempDir() + "/conveyor.db"}
	e, d := openDiskFull(b, cfg)
	batch := make([]broker.NewTask, 10_000)
	for i := range batch {
		batch[i] = bt.NewTask("q")
	}
	for range storageFailureTasks / len(batch) {
		bt.Enqueue(b, e, bt.T0, batch...)
	}
	run := func(b *testing.B) {
		now := bt.T0.Add(time.Second)
		for range b.N {
			ls, err := e.Lease(b.Context(), broker.LeaseParams{SessionID: "s1", Picks: []broker.QueuePick{{Queue: "q", N: 1}}, Now: now, TTL: bt.TTL})
			if err != nil || len(ls) != 1 {
				b.Fatalf("Lease = %d leases, %v", len(ls), err)
			}
			if _, err := e.Complete(b.Context(), decide("s1", ls[0], outcomeSuccess, now)); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("healthy", run)
	b.Run("disk-full", func(b *testing.B) {
		d.full.Store(true)
		defer d.full.Store(false)
		run(b)
	})
	if err := e.Sync(b.Context()); err != nil {
		b.Fatal(err)
	}
	// One reload whatever b.N: it is what each failed commit would cost
	// an engine that rebuilt its indexes (the design before retrying).
	b.Run("reload", func(b *testing.B) {
		if err := e.Close(); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		var err error
		if e, err = bolt.Open(bolt.Config{Path: cfg.Path}); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(time.Since(start).Seconds(), "s/reload")
		reopened := e
		b.Cleanup(func() { _ = reopened.Close() }) // before openEngine's check

	})
}

// TestConflictWaitsForDurable: a repeat of a task's id or unique key is
// not answered already_exists while that task's enqueue is not durable
// (its commit may never land): Enqueue and EnqueueTx wait for the commit,
// bounded by their contexts, and answer from its outcome.
func TestConflictWaitsForDurable(t *testing.T) {
	t.Parallel()
	e, d := openDiskFull(t, bolt.Config{})
	d.full.Store(true)

	first := bt.NewTask("q")
	first.ID, first.UniqueKey = bt.NewID(), "u"
	sameID := first
	sameID.UniqueKey = ""
	sameKey := bt.NewTask("q")
	sameKey.UniqueKey = "u"
	params := func(nt broker.NewTask) broker.EnqueueParams {
		return broker.EnqueueParams{Now: bt.T0, Tasks: bt.WithStates([]broker.NewTask{nt}, bt.T0)}
	}
	short := func() context.Context {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		t.Cleanup(cancel)
		return ctx
	}
	if _, err := e.Enqueue(short(), params(first)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("first Enqueue while the disk is full: %v, want DeadlineExceeded", err)
	}
	for name, nt := range map[string]broker.NewTask{"id": sameID, "unique key": sameKey} {
		res, err := e.Enqueue(short(), params(nt))
		if !errors.Is(err, context.DeadlineExceeded) || len(res) != 1 || !errors.Is(res[0].Err, context.DeadlineExceeded) {
			t.Fatalf("Enqueue repeating the %s of a task not durable: %v, %+v; want DeadlineExceeded", name, err, res)
		}
		if _, err := e.EnqueueTx(short(), params(nt)); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("EnqueueTx repeating the %s of a task not durable: %v, want DeadlineExceeded", name, err)
		}
	}

	waiting := make(chan []broker.EnqueueResult, 1)
	go func() {
		res, _ := e.Enqueue(context.Background(), params(sameID))
		waiting <- res
	}()
	d.full.Store(false)
	select {
	case res := <-waiting:
		if !errors.Is(res[0].Err, broker.ErrAlreadyExists) {
			t.Fatalf("repeat once the first landed: %v, want ErrAlreadyExists", res[0].Err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the repeat still waits after space returned")
	}
	bt.RequireState(t, e, first.ID, broker.StatePending)
	res, err := e.Enqueue(t.Context(), params(sameKey))
	if err != nil || !errors.Is(res[0].Err, broker.ErrAlreadyExists) {
		t.Fatalf("unique key repeat once the first landed: %v, %v; want ErrAlreadyExists", err, res[0].Err)
	}
	if _, err := e.EnqueueTx(t.Context(), params(sameKey)); !errors.Is(err, broker.ErrAlreadyExists) {
		t.Fatalf("EnqueueTx unique key repeat once the first landed: %v, want ErrAlreadyExists", err)
	}
}

// TestConflictWithLostEnqueue: a task whose commit never lands (the
// engine closed while the disk was full) was never reported to exist, and
// its id is free after a restart.
func TestConflictWithLostEnqueue(t *testing.T) {
	t.Parallel()
	d := newDiskFull()
	cfg := bolt.Config{Path: filepath.Join(t.TempDir(), "conveyor.db")}
	bolt.SetCommitFault(&cfg, d.fault)
	e, err := bolt.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	d.full.Store(true)
	nt := bt.NewTask("q")
	nt.ID = bt.NewID()
	p := broker.EnqueueParams{Now: bt.T0, Tasks: bt.WithStates([]broker.NewTask{nt}, bt.T0)}
	for range 2 { // the first enqueue, then its retry: neither is answered
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		res, err := e.Enqueue(ctx, p)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Enqueue while the disk is full: %v, %+v; want DeadlineExceeded", err, res)
		}
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	d.full.Store(false)
	e = openEngine(t, bolt.Config{Path: cfg.Path})
	if _, err := e.GetTask(t.Context(), nt.ID); !errors.Is(err, broker.ErrNotFound) {
		t.Fatalf("GetTask of the lost task: %v, want ErrNotFound", err)
	}
	bt.Enqueue(t, e, bt.T0, nt)
	bt.RequireState(t, e, nt.ID, broker.StatePending)
}

// TestEnqueueKeepsNoCallerTasks: an Enqueue whose context ends before its
// commit does not read the caller's tasks afterwards; a caller that reuses
// its slice does not change what is stored when the commit lands.
func TestEnqueueKeepsNoCallerTasks(t *testing.T) {
	t.Parallel()
	cfg := bolt.Config{Path: filepath.Join(t.TempDir(), "conveyor.db")}
	e, d := openDiskFull(t, cfg)
	setCfg := broker.QueueConfig{Group: broker.GroupPolicy{MaxSize: 2, MaxDelay: time.Hour, GracePeriod: time.Hour}}
	if _, err := e.UpdateQueueConfig(t.Context(), "q", func(c *broker.QueueConfig) { *c = setCfg }); err != nil {
		t.Fatal(err)
	}
	d.full.Store(true)
	tasks := []broker.NewTask{bt.NewTask("q"), bt.NewTask("q"), bt.NewTask("q")}
	tasks[1].Group, tasks[2].Group = "g", "g"
	tasks = bt.WithStates(tasks, bt.T0)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	_, err := e.Enqueue(ctx, broker.EnqueueParams{Now: bt.T0, Tasks: tasks})
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Enqueue while the disk is full: %v, want DeadlineExceeded", err)
	}
	for i := range tasks { // the caller reuses its tasks
		tasks[i].Queue, tasks[i].Group, tasks[i].Type = "elsewhere", "other", "other"
	}
	d.full.Store(false)
	if err := e.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	counts := []int{-1}
	e.ReadyGroups([]string{"q"}, []string{"test"}, counts)
	if counts[0] != 1 {
		t.Fatalf("ReadyGroups = %d, want the group of the 2 grouped tasks fired", counts[0])
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e = openEngine(t, bolt.Config{Path: cfg.Path}) // the counts as stored
	if q := bt.Queue(t, e, "q"); q.Enqueued != 3 {
		t.Fatalf("queue q: enqueued %d, want 3", q.Enqueued)
	}
	if q := bt.Queue(t, e, "elsewhere"); q.Name != "" {
		t.Fatalf("queue elsewhere exists (%+v): the commit read the caller's tasks", q)
	}
}
