package conveyor_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/conveyor-dev/conveyor/broker"
	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
	"github.com/conveyor-dev/conveyor/server"
)

// TestHandleBatchEveryTrigger runs a Worker's batch handler on groups that
// fire by each of their three triggers, against a real server: by size,
// by the max delay since the first member, and by the grace period since
// the last. A member that fails comes back alone, as a batch of one.
func TestHandleBatchEveryTrigger(t *testing.T) {
	t.Parallel()
	e := wtSetup(t, server.Config{GroupPolicy: broker.GroupPolicy{MaxSize: 4, MaxDelay: time.Hour, GracePeriod: time.Hour}})
	ctx := context.Background()
	configure := func(queue string, p *conveyorv1.GroupPolicy) {
		t.Helper()
		if _, err := e.admin.UpdateQueueConfig(ctx, connect.NewRequest(&conveyorv1.UpdateQueueConfigRequest{
			Config: &conveyorv1.QueueConfig{Queue: queue, GroupPolicy: p}})); err != nil {
			t.Fatal(err)
		}
	}
	configure("delay", &conveyorv1.GroupPolicy{MaxSize: 100, MaxDelay: durationpb.New(300 * time.Millisecond)})
	configure("grace", &conveyorv1.GroupPolicy{MaxSize: 100, GracePeriod: durationpb.New(200 * time.Millisecond)})

	batches := make(chan *conveyor.DeliveryBatch, 16)
	w := e.newWorker(conveyor.WithQueue("size", 1), conveyor.WithQueue("delay", 1), conveyor.WithQueue("grace", 1), conveyor.WithConcurrency(4))
	var failedOnce atomic.Bool
	w.HandleBatch("agg", conveyor.BatchHandlerFunc(func(_ context.Context, b *conveyor.DeliveryBatch) error {
		batches <- b
		for _, d := range b.Tasks {
			if string(d.Payload) == `"fail-once"` && failedOnce.CompareAndSwap(false, true) {
				b.Fail(d, fmt.Errorf("first try fails"))
			}
		}
		return nil
	}))
	wtRun(t, w)

	grouped := func(queue, payload string) *conveyorv1.EnqueueRequest {
		return wtReq(queue, "agg", payload, &conveyorv1.TaskOptions{Group: "g",
			RetryPolicy: &conveyorv1.RetryPolicy{Strategy: conveyorv1.RetryStrategy_RETRY_STRATEGY_FIXED, Base: durationpb.New(10 * time.Millisecond)}})
	}
	e.enqueueAll([]*conveyorv1.EnqueueRequest{grouped("size", `1`), grouped("size", `2`), grouped("size", `"fail-once"`), grouped("size", `4`)})
	b := wtRecv(t, batches, 10*time.Second, "the batch fired by size")
	if len(b.Tasks) != 4 || b.Group != "g" {
		t.Fatalf("size trigger: a batch of %d (group %q), want 4 of g", len(b.Tasks), b.Group)
	}
	if again := wtRecv(t, batches, 10*time.Second, "the failed member alone"); len(again.Tasks) != 1 || string(again.Tasks[0].Payload) != `"fail-once"` || again.Group != "" {
		t.Fatalf("retry: %d tasks %q (group %q), want the failed member alone", len(again.Tasks), again.Tasks[0].Payload, again.Group)
	}

	start := time.Now()
	e.enqueueAll([]*conveyorv1.EnqueueRequest{grouped("delay", `1`), grouped("delay", `2`)})
	if b := wtRecv(t, batches, 10*time.Second, "the batch fired by max delay"); len(b.Tasks) != 2 {
		t.Fatalf("max delay trigger: a batch of %d, want 2", len(b.Tasks))
	}
	if waited := time.Since(start); waited < 300*time.Millisecond {
		t.Fatalf("the max-delay group fired after %s, before its 300ms", waited)
	}

	start = time.Now()
	e.enqueueAll([]*conveyorv1.EnqueueRequest{grouped("grace", `1`)})
	if b := wtRecv(t, batches, 10*time.Second, "the batch fired by grace period"); len(b.Tasks) != 1 {
		t.Fatalf("grace trigger: a batch of %d, want 1", len(b.Tasks))
	}
	if waited := time.Since(start); waited < 200*time.Millisecond {
		t.Fatalf("the grace group fired after %s, before its 200ms", waited)
	}
	for _, q := range []string{"size", "delay", "grace"} {
		waitQueueDone(t, q, e)
	}
}

// waitQueueDone waits for every task of queue to complete.
func waitQueueDone(t *testing.T, queue string, e *wtEnv) {
	t.Helper()
	e.waitQueue(queue, 10*time.Second, "every task done", func(q *conveyorv1.QueueInfo) bool {
		return q.GetPending()+q.GetActive()+q.GetRetry()+q.GetAggregating() == 0 && q.GetCompleted() > 0
	})
}

// TestHandleBatchResultsOverTheFrameBound runs a batch whose members'
// results together pass the 32 MiB a worker frame may carry (40 members
// of 1 MiB each). The BatchResult carries the members that fit; the rest
// fail their attempt with an error naming the bound, come back alone and
// complete then. Without the bound the server would refuse the frame and
// end the session.
func TestHandleBatchResultsOverTheFrameBound(t *testing.T) {
	t.Parallel()
	const members = 40
	e := wtSetup(t, server.Config{GroupPolicy: broker.GroupPolicy{MaxSize: members, MaxDelay: time.Hour, GracePeriod: time.Hour}})
	var batches atomic.Int32
	w := e.newWorker(conveyor.WithQueue("big", 1), conveyor.WithConcurrency(1))
	w.HandleBatch("agg", conveyor.BatchHandlerFunc(func(_ context.Context, b *conveyor.DeliveryBatch) error {
		batches.Add(1)
		for _, d := range b.Tasks {
			d.SetResult(make([]byte, conveyor.MaxResultBytes))
		}
		return nil
	}))
	r := wtRun(t, w)
	reqs := make([]*conveyorv1.EnqueueRequest, members)
	for i := range reqs {
		reqs[i] = wtReq("big", "agg", fmt.Sprint(i), &conveyorv1.TaskOptions{Group: "g",
			RetryPolicy: &conveyorv1.RetryPolicy{Strategy: conveyorv1.RetryStrategy_RETRY_STRATEGY_FIXED, Base: durationpb.New(10 * time.Millisecond)}})
	}
	ids := e.enqueueAll(reqs)
	var retried int
	for _, id := range ids {
		// 40 MiB of results through the engine, and nine retries of 1 MiB
		// each: generous for a loaded machine under -race.
		info := e.waitState(id, conveyorv1.TaskState_TASK_STATE_COMPLETED, 2*time.Minute)
		if len(info.GetResult()) != conveyor.MaxResultBytes {
			t.Errorf("task %s: a result of %d bytes, want %d", id, len(info.GetResult()), conveyor.MaxResultBytes)
		}
		if info.GetRetried() == 0 {
			continue
		}
		retried++
		if !strings.Contains(info.GetLastError(), "32 MiB") {
			t.Errorf("task %s retried with last_error %q, want one naming the 32 MiB frame bound", id, info.GetLastError())
		}
	}
	// 31 results of 1 MiB and their framing fit in 32 MiB.
	if retried != members-31 {
		t.Errorf("%d members retried, want the %d that did not fit", retried, members-31)
	}
	if got := batches.Load(); got != 1+int32(retried) {
		t.Errorf("%d batch handler calls, want 1 and one per retried member (%d)", got, retried)
	}
	select {
	case <-r.done:
		t.Fatalf("Run returned %v", r.err)
	default:
	}
}

// TestCancelOfABatchMemberSparesTheOthers: an operator cancels one member
// of a running batch. The Cancel names that member only, so it alone is
// the server's to decide (a failure after a cancel archives it, saying
// so); the batch handler's context ends for all, but the members nobody
// canceled are given back with no retry counted, not failed: they come
// back alone and complete on their first counted attempt.
func TestCancelOfABatchMemberSparesTheOthers(t *testing.T) {
	t.Parallel()
	e := wtSetup(t, server.Config{GroupPolicy: broker.GroupPolicy{MaxSize: 3, MaxDelay: time.Hour, GracePeriod: time.Hour}})
	slow := &conveyorv1.RetryPolicy{Strategy: conveyorv1.RetryStrategy_RETRY_STRATEGY_FIXED, Base: durationpb.New(time.Hour)}
	ids := e.enqueueAll([]*conveyorv1.EnqueueRequest{
		wtReq("bc", "agg", "1", &conveyorv1.TaskOptions{Group: "g", RetryPolicy: slow}),
		wtReq("bc", "agg", "2", &conveyorv1.TaskOptions{Group: "g", RetryPolicy: slow}),
		wtReq("bc", "agg", "3", &conveyorv1.TaskOptions{Group: "g", RetryPolicy: slow}),
	})
	running := make(chan int, 4)
	w := e.newWorker(conveyor.WithQueue("bc", 1), conveyor.WithConcurrency(1))
	w.HandleBatch("agg", conveyor.BatchHandlerFunc(func(ctx context.Context, b *conveyor.DeliveryBatch) error {
		if len(b.Tasks) == 1 {
			return nil // a member back alone
		}
		running <- len(b.Tasks)
		<-ctx.Done()
		return context.Cause(ctx)
	}))
	wtRun(t, w)
	if n := wtRecv(t, running, 10*time.Second, "the batch runs"); n != 3 {
		t.Fatalf("a batch of %d, want 3", n)
	}
	if _, err := e.admin.CancelTask(context.Background(), connect.NewRequest(&conveyorv1.CancelTaskRequest{Id: ids[0]})); err != nil {
		t.Fatal(err)
	}
	if info := e.waitState(ids[0], conveyorv1.TaskState_TASK_STATE_ARCHIVED, 10*time.Second); !strings.HasPrefix(info.GetLastError(), broker.CanceledMessage) {
		t.Fatalf("the canceled member: last_error %q, want it to say it was canceled", info.GetLastError())
	}
	e.requireSpared(ids[1:], "nobody canceled it")
}

// TestBatchMemberTimeoutSparesTheOthers: one member's timeout ends the
// batch handler's context for all, but only that member ran out of time:
// it alone fails its attempt, and the others, whose own bounds had not
// passed, are given back with no retry counted and complete when they come
// back alone.
func TestBatchMemberTimeoutSparesTheOthers(t *testing.T) {
	t.Parallel()
	e := wtSetup(t, server.Config{GroupPolicy: broker.GroupPolicy{MaxSize: 3, MaxDelay: time.Hour, GracePeriod: time.Hour}})
	slow := &conveyorv1.RetryPolicy{Strategy: conveyorv1.RetryStrategy_RETRY_STRATEGY_FIXED, Base: durationpb.New(time.Hour)}
	ids := e.enqueueAll([]*conveyorv1.EnqueueRequest{
		wtReq("bt", "agg", "1", &conveyorv1.TaskOptions{Group: "g", RetryPolicy: slow, Timeout: durationpb.New(200 * time.Millisecond)}),
		wtReq("bt", "agg", "2", &conveyorv1.TaskOptions{Group: "g", RetryPolicy: slow}),
		wtReq("bt", "agg", "3", &conveyorv1.TaskOptions{Group: "g", RetryPolicy: slow, Timeout: durationpb.New(time.Hour)}),
	})
	w := e.newWorker(conveyor.WithQueue("bt", 1), conveyor.WithConcurrency(1))
	w.HandleBatch("agg", conveyor.BatchHandlerFunc(func(ctx context.Context, b *conveyor.DeliveryBatch) error {
		if len(b.Tasks) == 1 {
			return nil // a member back alone
		}
		<-ctx.Done()
		return ctx.Err()
	}))
	wtRun(t, w)
	if info := e.waitState(ids[0], conveyorv1.TaskState_TASK_STATE_RETRY, 10*time.Second); info.GetRetried() != 1 {
		t.Fatalf("the member that timed out: retried %d, want 1", info.GetRetried())
	}
	e.requireSpared(ids[1:], "its own bound never passed")
}

// TestBatchHandlerPanicKeepsFailedMembers: a batch handler that gave a
// member its own outcome (DeliveryBatch.Fail) and then panics still
// reports that member's outcome; only the others take the panic's RETRY.
func TestBatchHandlerPanicKeepsFailedMembers(t *testing.T) {
	t.Parallel()
	e := wtSetup(t, server.Config{GroupPolicy: broker.GroupPolicy{MaxSize: 2, MaxDelay: time.Hour, GracePeriod: time.Hour}})
	slow := &conveyorv1.RetryPolicy{Strategy: conveyorv1.RetryStrategy_RETRY_STRATEGY_FIXED, Base: durationpb.New(time.Hour)}
	ids := e.enqueueAll([]*conveyorv1.EnqueueRequest{
		wtReq("bp", "agg", `"bad"`, &conveyorv1.TaskOptions{Group: "g", RetryPolicy: slow}),
		wtReq("bp", "agg", `"good"`, &conveyorv1.TaskOptions{Group: "g", RetryPolicy: slow}),
	})
	w := e.newWorker(conveyor.WithQueue("bp", 1), conveyor.WithConcurrency(1))
	w.HandleBatch("agg", conveyor.BatchHandlerFunc(func(_ context.Context, b *conveyor.DeliveryBatch) error {
		for _, d := range b.Tasks {
			if string(d.Payload) == `"bad"` {
				b.Fail(d, conveyor.SkipRetry(errors.New("bad member")))
			}
		}
		panic("boom")
	}))
	wtRun(t, w)
	if info := e.waitState(ids[0], conveyorv1.TaskState_TASK_STATE_ARCHIVED, 10*time.Second); info.GetLastError() != "bad member" {
		t.Fatalf("the failed member: last_error %q, want %q", info.GetLastError(), "bad member")
	}
	if info := e.waitState(ids[1], conveyorv1.TaskState_TASK_STATE_RETRY, 10*time.Second); info.GetLastError() != "panic: boom" {
		t.Fatalf("the other member: last_error %q, want %q", info.GetLastError(), "panic: boom")
	}
}

// requireSpared waits for batch members stopped for another member's sake
// to complete, with no retry counted for them (why says why none should).
func (e *wtEnv) requireSpared(ids []string, why string) {
	e.t.Helper()
	for _, id := range ids {
		if info := e.waitState(id, conveyorv1.TaskState_TASK_STATE_COMPLETED, 10*time.Second); info.GetRetried() != 0 {
			e.t.Fatalf("member %s completed with retried %d, want 0: %s", id, info.GetRetried(), why)
		}
	}
}
