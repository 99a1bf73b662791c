package bolt

import (
	"context"
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
	bt "github.com/conveyor-dev/conveyor/broker/brokertest"
)

// TestReadsOvertakenByCommitsStillDecide: a call whose read of the file
// before the lock is always overtaken by a commit (a long read while
// commits keep coming; here every read looks stale) does not retry
// forever: it reads under the lock, once no commit is in flight.
func TestReadsOvertakenByCommitsStillDecide(t *testing.T) {
	e, err := Open(Config{Path: filepath.Join(t.TempDir(), "conveyor.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := e.Close(); err != nil {
			t.Error(err)
		}
	}()
	finished := bt.EnqueueOne(t, e, bt.T0, bt.NewTask("q"))
	bt.Succeed(t, e, "s", bt.LeaseOne(t, e, "s", "q", bt.T0), bt.T0)
	if err := e.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	overtaken := func() {
		e.mu.Lock()
		e.commit.applied = math.MaxUint64
		e.mu.Unlock()
	}
	calls := map[string]func(ctx context.Context) error{
		"Act": func(ctx context.Context) error {
			res, err := e.Act(ctx, broker.ActParams{Action: broker.ActionDelete, IDs: []string{finished.ID}, Now: bt.T0})
			if err == nil {
				err = res[0].Err
			}
			return err
		},
		"Enqueue": func(ctx context.Context) error {
			nt := bt.NewTask("q")
			nt.ID = bt.NewID()
			nt.DependsOn = []broker.Dependency{{TaskID: finished.ID}}
			res, err := e.Enqueue(ctx, broker.EnqueueParams{Now: bt.T0, Tasks: bt.WithStates([]broker.NewTask{nt}, bt.T0)})
			if err == nil {
				err = res[0].Err
			}
			return err
		},
	}
	for _, name := range []string{"Enqueue", "Act"} {
		overtaken()
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		done := make(chan error, 1)
		go func() { done <- calls[name](ctx) }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("%s: %v", name, err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("%s did not decide while its reads looked overtaken", name)
			_ = e.Close() // ends the call
			if err := <-done; err != nil {
				t.Logf("%s after Close: %v", name, err)
			}
			cancel()
			return
		}
		cancel()
	}
	bt.RequireCounts(t, e, "q", bt.Counts{broker.StatePending: 1})
}
