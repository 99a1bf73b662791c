package conveyor_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/durationpb"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

// slowRetry keeps a failed task in RETRY for the rest of the test.
func slowRetry() *conveyorv1.TaskOptions {
	return &conveyorv1.TaskOptions{RetryPolicy: &conveyorv1.RetryPolicy{
		Strategy: conveyorv1.RetryStrategy_RETRY_STRATEGY_FIXED, Base: durationpb.New(time.Hour)}}
}

// waitFailed waits until task id has failed an attempt (RETRY or ARCHIVED).
func (e *wtEnv) waitFailed(id string, timeout time.Duration) *conveyorv1.TaskInfo {
	e.t.Helper()
	var info *conveyorv1.TaskInfo
	servertest.Eventually(e.t, timeout, "task "+id+" fails an attempt", func() bool {
		info = e.get(id)
		s := info.GetState()
		return s == conveyorv1.TaskState_TASK_STATE_RETRY || s == conveyorv1.TaskState_TASK_STATE_ARCHIVED
	})
	return info
}

// TestWorkerOversizedResult: a result over MaxResultBytes fails that task's
// attempt, and only that: the session survives and the worker goes on with
// other tasks. A result of exactly the limit is kept.
func TestWorkerOversizedResult(t *testing.T) {
	t.Parallel()
	e := wtSetup(t, server.Config{})
	w := e.newWorker(conveyor.WithQueue("big", 1), conveyor.WithConcurrency(2))
	w.HandleFunc("result", func(_ context.Context, d *conveyor.Delivery) error {
		var n int
		if _, err := fmt.Sscan(string(d.Payload), &n); err != nil {
			return conveyor.SkipRetry(err)
		}
		d.SetResult(make([]byte, n))
		return nil
	})
	r := wtRun(t, w)

	big := e.enqueue(wtReq("big", "result", fmt.Sprint(conveyor.MaxResultBytes+1), slowRetry()))
	info := e.waitFailed(big, 20*time.Second)
	if want := "result is 1048577 bytes; the limit is 1048576 (1 MiB)"; info.GetLastError() != want {
		t.Fatalf("last_error = %q, want %q", info.GetLastError(), want)
	}
	if len(info.GetResult()) != 0 {
		t.Errorf("the oversized result was stored (%d bytes)", len(info.GetResult()))
	}

	exact := e.enqueue(wtReq("big", "result", fmt.Sprint(conveyor.MaxResultBytes), slowRetry()))
	others := make([]string, 5)
	for i := range others {
		others[i] = e.enqueue(wtReq("big", "result", "2", slowRetry()))
	}
	for _, id := range others {
		if got := e.waitState(id, conveyorv1.TaskState_TASK_STATE_COMPLETED, 20*time.Second).GetResult(); len(got) != 2 {
			t.Errorf("task %s result is %d bytes, want 2", id, len(got))
		}
	}
	if got := e.waitState(exact, conveyorv1.TaskState_TASK_STATE_COMPLETED, 20*time.Second).GetResult(); len(got) != conveyor.MaxResultBytes {
		t.Errorf("the 1 MiB result is %d bytes, want %d", len(got), conveyor.MaxResultBytes)
	}
	select {
	case <-r.done:
		t.Fatalf("Run returned %v: one task's result ended the worker", r.err)
	default:
	}
}

// TestWorkerBoundsMessages: long error and progress messages arrive cut to
// their bounds at a UTF-8 boundary, and invalid UTF-8 (which a protobuf
// string cannot carry) arrives repaired instead of breaking the session.
func TestWorkerBoundsMessages(t *testing.T) {
	t.Parallel()
	e := wtSetup(t, server.Config{})
	long := "start " + strings.Repeat("é", 20000) // 40006 bytes, 2-byte runes
	progressed := make(chan struct{})
	release := make(chan struct{})
	w := e.newWorker(conveyor.WithQueue("msg", 1), conveyor.WithConcurrency(4), conveyor.WithProgressInterval(time.Millisecond))
	w.HandleFunc("long", func(context.Context, *conveyor.Delivery) error { return conveyor.SkipRetry(errors.New(long)) })
	w.HandleFunc("invalid", func(context.Context, *conveyor.Delivery) error { return errors.New("bad \xff byte") })
	w.HandleFunc("progress", func(ctx context.Context, d *conveyor.Delivery) error {
		d.Progress(50, "€"+strings.Repeat("ü", 1000)) // 2003 bytes
		close(progressed)
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	wtRun(t, w)

	check := func(what, got, prefix string, bound int) {
		t.Helper()
		if len(got) > bound || !strings.HasSuffix(got, " … [truncated]") || !strings.HasPrefix(got, prefix) || !utf8.ValidString(got) {
			t.Errorf("%s: %d bytes %q..., want a valid UTF-8 prefix of the message within %d bytes ending in the truncation mark",
				what, len(got), got[:min(len(got), 40)], bound)
		}
		if len(got) < bound-len(" … [truncated]")-utf8.UTFMax {
			t.Errorf("%s: cut to %d bytes, more than needed for a bound of %d", what, len(got), bound)
		}
	}
	id := e.enqueue(wtReq("msg", "long", "{}", nil))
	info := e.waitState(id, conveyorv1.TaskState_TASK_STATE_ARCHIVED, 20*time.Second)
	check("last_error", info.GetLastError(), "start éé", conveyor.MaxErrorMessageBytes)

	id = e.enqueue(wtReq("msg", "invalid", "{}", slowRetry()))
	if got := e.waitFailed(id, 20*time.Second).GetLastError(); got != "bad \uFFFD byte" {
		t.Errorf("last_error = %q, want the invalid byte replaced", got)
	}

	id = e.enqueue(wtReq("msg", "progress", "{}", nil))
	wtRecv(t, progressed, 20*time.Second, "the progress call")
	servertest.Eventually(t, 20*time.Second, "the progress reaches the server", func() bool {
		info = e.get(id)
		return info.GetProgressPercent() == 50
	})
	check("progress_message", info.GetProgressMessage(), "€üü", conveyor.MaxProgressMessageBytes)
	close(release)
	e.waitState(id, conveyorv1.TaskState_TASK_STATE_COMPLETED, 20*time.Second)
}

// TestWorkerConcurrencyAboveTheServerLimit: a Worker declaring far more
// concurrency than the server sends one session (a million against 8) is
// admitted, runs what it is sent, at most 8 at once, and gets the rest as
// slots free.
func TestWorkerConcurrencyAboveTheServerLimit(t *testing.T) {
	t.Parallel()
	const limit = 8
	e := wtSetup(t, server.Config{MaxSessionConcurrency: limit})
	var running, most atomic.Int32
	gate := make(chan struct{})
	w := e.newWorker(conveyor.WithQueue("wide", 1), conveyor.WithConcurrency(1_000_000))
	w.HandleFunc("t", func(ctx context.Context, _ *conveyor.Delivery) error {
		n := running.Add(1)
		defer running.Add(-1)
		for m := most.Load(); n > m; m = most.Load() {
			if most.CompareAndSwap(m, n) {
				break
			}
		}
		select {
		case <-gate:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	wtRun(t, w)
	ids := make([]string, 20)
	for i := range ids {
		ids[i] = e.enqueue(wtReq("wide", "t", "", nil))
	}
	servertest.Eventually(t, 20*time.Second, "8 handlers running", func() bool { return running.Load() == limit })
	if a := e.queue("wide").GetActive(); a != limit {
		t.Fatalf("%d tasks active, want %d (the server's limit)", a, limit)
	}
	close(gate)
	for _, id := range ids {
		e.waitState(id, conveyorv1.TaskState_TASK_STATE_COMPLETED, 20*time.Second)
	}
	if m := most.Load(); m > limit {
		t.Fatalf("%d handlers ran at once, want at most %d", m, limit)
	}
}
