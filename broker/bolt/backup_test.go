package bolt_test

import (
	"bytes"
	"context"
	"io"
	"runtime"
	"testing"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
	"github.com/conveyor-dev/conveyor/broker/bolt"
	bt "github.com/conveyor-dev/conveyor/broker/brokertest"
	"github.com/conveyor-dev/conveyor/internal/testwait"
)

// gatedWriter is a backup's destination that holds the first write until
// it is opened, so the backup's read transaction stays open meanwhile.
type gatedWriter struct {
	started chan struct{} // closed at the first write
	open    chan struct{} // closed by the test to let the copy go on
	first   bool
}

func (w *gatedWriter) Write(p []byte) (int, error) {
	if !w.first {
		w.first = true
		close(w.started)
		<-w.open
	}
	return io.Discard.Write(p)
}

// waitForStack waits until some goroutine's stack holds fn, a function as
// runtime.Stack names it.
func waitForStack(t *testing.T, fn string) {
	t.Helper()
	buf := make([]byte, 1<<20)
	testwait.Until(t, 10*time.Second, "a goroutine reaches "+fn, func() bool {
		n := runtime.Stack(buf, true)
		return bytes.Contains(buf[:n], []byte(fn))
	})
}

// TestBackupDoesNotFreezeTheEngine: while a backup holds its read
// transaction, a commit that grows the file past its mapped size waits
// for it, and bbolt makes every new read transaction wait behind that
// commit. A call that needs to read the file then waits too, but the
// engine's other calls go on: no read transaction is begun under the
// engine's lock. (Lease itself reads the leased tasks' specs, outside the
// lock: it waits for the commit too, and is not the probe here.)
func TestBackupDoesNotFreezeTheEngine(t *testing.T) {
	finished := func(t *testing.T, b broker.Broker) string {
		t.Helper()
		task := bt.EnqueueOne(t, b, bt.T0, bt.NewTask("done"))
		bt.Succeed(t, b, "s", bt.LeaseOne(t, b, "s", "done", bt.T0), bt.T0)
		return task.ID
	}
	calls := []struct {
		name string
		// call reads the file: a producer-chosen id, a dependency.
		call func(ctx context.Context, b broker.Broker, dep string) error
	}{
		{"EnqueueWithID", func(ctx context.Context, b broker.Broker, _ string) error {
			nt := bt.NewTask("q")
			nt.ID = bt.NewID()
			res, err := b.Enqueue(ctx, broker.EnqueueParams{Now: bt.T0, Tasks: bt.WithStates([]broker.NewTask{nt}, bt.T0)})
			if err == nil {
				err = res[0].Err
			}
			return err
		}},
		{"EnqueueWithDependency", func(ctx context.Context, b broker.Broker, dep string) error {
			nt := bt.NewTask("q")
			nt.DependsOn = []broker.Dependency{{TaskID: dep}}
			res, err := b.Enqueue(ctx, broker.EnqueueParams{Now: bt.T0, Tasks: bt.WithStates([]broker.NewTask{nt}, bt.T0)})
			if err == nil {
				err = res[0].Err
			}
			return err
		}},
		{"EnqueueTx", func(ctx context.Context, b broker.Broker, dep string) error {
			nt := bt.NewTask("q")
			nt.ID = bt.NewID()
			nt.DependsOn = []broker.Dependency{{TaskID: dep}}
			_, err := b.EnqueueTx(ctx, broker.EnqueueParams{Now: bt.T0, Tasks: bt.WithStates([]broker.NewTask{nt}, bt.T0)})
			return err
		}},
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			var cfg bolt.Config
			bolt.SetMmapSize(&cfg, 1<<16)
			e := openEngine(t, cfg)
			dep := finished(t, e)
			bt.EnqueueOne(t, e, bt.T0, bt.NewTask("work"))
			running := bt.LeaseOne(t, e, "s", "work", bt.T0)

			w := &gatedWriter{started: make(chan struct{}), open: make(chan struct{})}
			backedUp := make(chan error, 1)
			go func() {
				_, err := e.Backup(context.Background(), w)
				backedUp <- err
			}()
			<-w.started
			released := false
			release := func() {
				if !released {
					released = true
					close(w.open)
				}
			}
			defer release()

			// A commit that outgrows the mapping: it waits for the backup.
			big := bt.NewTask("big")
			big.Payload = make([]byte, 4<<20)
			grown := make(chan error, 1)
			go func() {
				res, err := e.Enqueue(context.Background(), broker.EnqueueParams{Now: bt.T0, Tasks: bt.WithStates([]broker.NewTask{big}, bt.T0)})
				if err == nil {
					err = res[0].Err
				}
				grown <- err
			}()
			waitForStack(t, "go.etcd.io/bbolt.(*DB).mmap(")

			// A call that must read the file waits behind that commit...
			read := make(chan error, 1)
			go func() { read <- c.call(context.Background(), e, dep) }()
			waitForStack(t, "go.etcd.io/bbolt.(*DB).beginTx(")

			// ... and the engine's other calls go on meanwhile: a worker's
			// heartbeat and result.
			answered := make(chan error, 1)
			go func() {
				n, err := e.Extend(context.Background(), broker.ExtendParams{SessionID: "s", Now: bt.T0, TTL: bt.TTL,
					Leases: []broker.LeaseRef{bt.Ref(running)}})
				if err == nil && n != 1 {
					t.Errorf("Extend during the backup renewed %d leases, want 1", n)
				}
				if err == nil {
					_, err = e.Complete(context.Background(), broker.Completed("s", bt.Ref(running), bt.T0, nil))
				}
				answered <- err
			}()
			select {
			case err := <-answered:
				if err != nil {
					t.Errorf("a heartbeat and a result during the backup: %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Errorf("a heartbeat and a result did not return while the backup held its read transaction: the engine is frozen")
				defer func() {
					if err := <-answered; err != nil {
						t.Error(err)
					}
				}()
			}

			release()
			for what, ch := range map[string]chan error{"Backup": backedUp, "the growing enqueue": grown, c.name: read} {
				if err := <-ch; err != nil {
					t.Errorf("%s: %v", what, err)
				}
			}
		})
	}
}
