package scheduler_test

import (
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
	"github.com/conveyor-dev/conveyor/broker/bolt"
	"github.com/conveyor-dev/conveyor/broker/brokertest"
	"github.com/conveyor-dev/conveyor/internal/testwait"
	"github.com/conveyor-dev/conveyor/scheduler"
)

// TestPromoterFollowsAWallClockSteppedForward schedules a task an hour
// ahead and then steps the wall clock two hours forward, as NTP or a
// resumed VM does: the promoter, asleep on a monotonic timer set for the
// hour, must notice within its bound and make the task pending, not wait
// out the hour.
func TestPromoterFollowsAWallClockSteppedForward(t *testing.T) {
	t.Parallel()
	b, err := bolt.Open(bolt.Config{Path: filepath.Join(t.TempDir(), "conveyor.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	var wall atomic.Int64
	wall.Store(t0.UnixNano())
	now := func() time.Time { return time.Unix(0, wall.Load()).UTC() }

	nt := brokertest.NewTask("q")
	nt.State, nt.ProcessAt = broker.StateScheduled, t0.Add(time.Hour)
	res, err := b.Enqueue(t.Context(), broker.EnqueueParams{Tasks: []broker.NewTask{nt}, Now: t0})
	if err != nil || res[0].Err != nil {
		t.Fatalf("enqueue: %v %+v", err, res)
	}
	id := res[0].Task.ID

	p := scheduler.NewPromoter(b, now, quiet)
	p.SetMaxSleep(5 * time.Millisecond) // the bound under test, shortened
	if err := p.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop(t.Context()) })
	wall.Add(int64(2 * time.Hour))
	testwait.Until(t, 10*time.Second, "the task due an hour ago is promoted", func() bool {
		task, err := b.GetTask(t.Context(), id)
		return err == nil && task.State == broker.StatePending
	})
}
