// Tasks a worker holds without starting them: parked by a drain, or
// waiting for a slot (sent past the declared concurrency). Only a scripted
// server can dispatch at such moments (see worker_fake_test.go).

package conveyor_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
)

// TestWorkerFakeDrainReleasesParkedTaskAtItsTimeout: a late dispatch
// parked by a drain never runs, so when its timeout passes it is given
// back (RELEASED), never failed (RETRY) as if it had run too long.
func TestWorkerFakeDrainReleasesParkedTaskAtItsTimeout(t *testing.T) {
	t.Parallel()
	d := wtStartDrain(t)
	s := d.s

	timeout := &conveyorv1.TaskOptions{Timeout: durationpb.New(200 * time.Millisecond)}
	s.send(wtDispatch("B", "t", "{}", timeout, time.Now().Add(200*time.Millisecond)))
	r := s.next("B's result", wtIsResult("B"), wtNoResult(t)).GetResult()
	if r.GetOutcome() != conveyorv1.TaskOutcome_TASK_OUTCOME_RELEASED || !strings.Contains(r.GetErrorMsg(), "unstarted") {
		t.Fatalf("B's result = %v, want RELEASED unstarted", r)
	}
	close(d.release)
	if r := s.next("A's result", wtIsResult("A"), wtNoResult(t)).GetResult(); r.GetOutcome() != conveyorv1.TaskOutcome_TASK_OUTCOME_SUCCESS {
		t.Fatalf("A's result = %v, want SUCCESS", r)
	}
	d.finish(t)
}

// TestWorkerFakeTimeoutCountsFromReceipt: tasks a server sends past the
// declared concurrency (which ours never does) wait for the slot the
// running task holds. One whose timeout passes meanwhile is given back
// unstarted (RELEASED); one that starts later has what is left of its
// timeout counted from its receipt, as the server counts it.
func TestWorkerFakeTimeoutCountsFromReceipt(t *testing.T) {
	t.Parallel()
	f := &wtFake{}
	url := wtStartFake(t, f)
	unblocked := make(chan struct{})
	unblock := sync.OnceFunc(func() { close(unblocked) })
	started := make(chan *conveyor.Delivery, 4)
	w := wtNewWorker(t, url, conveyor.WithConcurrency(1))
	w.HandleFunc("t", func(ctx context.Context, d *conveyor.Delivery) error {
		started <- d
		if d.ID == "A" {
			<-unblocked // keeps the only slot
		}
		return nil
	})
	wtRun(t, w)
	t.Cleanup(unblock) // before the worker's cleanup, should the test fail first
	s := f.session(t)
	s.send(wtDispatch("A", "t", "{}", nil, time.Now().Add(time.Hour)))
	wtRecv(t, started, 10*time.Second, "A starts")

	// B's timeout is also how long C, sent right after it, has to arrive
	// before the slot frees: the check of C's deadline below needs C
	// received by then.
	short := &conveyorv1.TaskOptions{Timeout: durationpb.New(time.Second)}
	long := &conveyorv1.TaskOptions{Timeout: durationpb.New(time.Minute)}
	s.send(wtDispatch("B", "t", "{}", short, time.Now().Add(time.Second)))
	sentC := time.Now()
	s.send(wtDispatch("C", "t", "{}", long, time.Now().Add(time.Minute)))
	r := s.next("B's result", wtIsResult("B"), wtNoResult(t)).GetResult()
	if r.GetOutcome() != conveyorv1.TaskOutcome_TASK_OUTCOME_RELEASED {
		t.Fatalf("B's result = %v, want RELEASED (it never started)", r)
	}
	freed := time.Now()
	unblock() // C cannot start before this
	if r := s.next("A's result", wtIsResult("A"), nil).GetResult(); r.GetOutcome() != conveyorv1.TaskOutcome_TASK_OUTCOME_SUCCESS {
		t.Fatalf("A's result = %v, want SUCCESS", r)
	}
	c := wtRecv(t, started, 10*time.Second, "C starts")
	if c.ID != "C" {
		t.Fatalf("%s started, want C (B was given back)", c.ID)
	}
	// The server counts C's minute from the dispatch, and takes it back
	// soon after: its handler has until its receipt plus that minute, not a
	// minute from its late start.
	if c.Deadline.Before(sentC.Add(time.Minute)) || !c.Deadline.Before(freed.Add(time.Minute)) {
		t.Fatalf("C's deadline is %s after it was sent and %s after it could start; want its receipt plus its 1m timeout",
			c.Deadline.Sub(sentC), c.Deadline.Sub(freed))
	}
	if r := s.next("C's result", wtIsResult("C"), wtNoResult(t)).GetResult(); r.GetOutcome() != conveyorv1.TaskOutcome_TASK_OUTCOME_SUCCESS {
		t.Fatalf("C's result = %v, want SUCCESS", r)
	}
}
