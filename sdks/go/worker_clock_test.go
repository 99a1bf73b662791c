// A worker whose clock is off the server's: a task's Deadline option is a
// time on the server's clock, and the worker must not read it on its own.

package conveyor_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

// wtSkewedWorker runs a worker for queue "clock" whose clock is skew off
// the host's (and so the server's), reporting each delivery on the
// returned channel.
func wtSkewedWorker(e *wtEnv, skew time.Duration) <-chan *conveyor.Delivery {
	got := make(chan *conveyor.Delivery, 16)
	w := e.newWorker(conveyor.WithQueue("clock", 1), conveyor.WithConcurrency(2))
	conveyor.SetClockSkewForTest(w, skew)
	w.HandleFunc("t", func(_ context.Context, d *conveyor.Delivery) error {
		got <- d
		return nil
	})
	wtRun(e.t, w)
	return got
}

func wtDeadlineReq(at time.Time) *conveyorv1.EnqueueRequest {
	return wtReq("clock", "t", "{}", &conveyorv1.TaskOptions{Deadline: timestamppb.New(at)})
}

// wtNear fails unless got is within a minute of want (far less than the
// skews tested, far more than any delay on a loaded machine).
func wtNear(t *testing.T, what string, got, want time.Time) {
	t.Helper()
	if d := got.Sub(want); d < -time.Minute || d > time.Minute {
		t.Fatalf("%s is %s off the task's deadline, want it within a minute", what, d)
	}
}

// TestWorkerClockSkewKeepsTheDeadline: a worker clock an hour ahead of the
// server's once found a task with ten minutes left past its deadline on
// arrival and gave it back unstarted, for the server to send straight back
// (a hot loop until the deadline); an hour behind, it gave the handler an
// hour too long. Either way the task now runs once, its handler's deadline
// where the server has it.
func TestWorkerClockSkewKeepsTheDeadline(t *testing.T) {
	t.Parallel()
	for _, skew := range []time.Duration{time.Hour, -time.Hour} {
		t.Run(skew.String(), func(t *testing.T) {
			t.Parallel()
			e := wtSetup(t, server.Config{})
			got := wtSkewedWorker(e, skew)
			deadline := time.Now().Add(10 * time.Minute)
			id := e.enqueue(wtDeadlineReq(deadline))
			d := wtRecv(t, got, 30*time.Second, "the task runs")
			wtNear(t, "the handler's deadline", d.Deadline, deadline)
			if info := e.waitState(id, conveyorv1.TaskState_TASK_STATE_COMPLETED, 30*time.Second); info.GetRetried() != 0 {
				t.Fatalf("the task completed after %d retries, want none", info.GetRetried())
			}
		})
	}
}

// TestWorkerClockAheadLearnsTheServersClock: a task with less than a lease
// TTL left tells the worker nothing of the server's clock (its deadline is
// Dispatch.deadline), but an earlier task without a deadline did: it runs,
// by its deadline on the server's clock, not by the worker's, an hour ahead.
func TestWorkerClockAheadLearnsTheServersClock(t *testing.T) {
	t.Parallel()
	e := wtSetup(t, server.Config{})
	got := wtSkewedWorker(e, time.Hour)
	first := e.enqueue(wtReq("clock", "t", "{}", nil))
	wtRecv(t, got, 30*time.Second, "the first task runs")
	e.waitState(first, conveyorv1.TaskState_TASK_STATE_COMPLETED, 30*time.Second)

	deadline := time.Now().Add(30 * time.Second) // less than the 60s lease TTL
	id := e.enqueue(wtDeadlineReq(deadline))
	d := wtRecv(t, got, 30*time.Second, "the task with a deadline runs")
	wtNear(t, "the handler's deadline", d.Deadline, deadline)
	e.waitState(id, conveyorv1.TaskState_TASK_STATE_COMPLETED, 30*time.Second)
}

// TestWorkerClockAheadFailsWhatItCannotTime: a worker an hour ahead whose
// first task has less than a lease TTL left cannot tell how much: it finds
// it past its deadline, and fails it (RETRY) instead of giving it back for
// the server to send straight back.
func TestWorkerClockAheadFailsWhatItCannotTime(t *testing.T) {
	t.Parallel()
	e := wtSetup(t, server.Config{})
	wtSkewedWorker(e, time.Hour)
	id := e.enqueue(wtDeadlineReq(time.Now().Add(30 * time.Second)))
	var info *conveyorv1.TaskInfo
	servertest.Eventually(t, 30*time.Second, "the task is failed once", func() bool {
		info = e.get(id)
		return info.GetRetried() > 0
	})
	if !strings.Contains(info.GetLastError(), "clock") {
		t.Fatalf("last_error = %q, want it to say the worker's clock is ahead", info.GetLastError())
	}
}
