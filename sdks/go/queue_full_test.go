package conveyor_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/gen/conveyor/v1/conveyorv1connect"
	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

// boundQueue sets queue's max_waiting on the server at url.
func boundQueue(t *testing.T, url, queue string, n int64) {
	t.Helper()
	admin := conveyorv1connect.NewAdminServiceClient(servertest.HTTPClient(), url, connect.WithGRPC())
	if _, err := admin.UpdateQueueConfig(t.Context(), connect.NewRequest(&conveyorv1.UpdateQueueConfigRequest{
		Config: &conveyorv1.QueueConfig{Queue: queue, MaxWaiting: n}})); err != nil {
		t.Fatalf("UpdateQueueConfig: %v", err)
	}
}

// requireQueueFull fails unless err is a full queue's refusal naming
// queue.
func requireQueueFull(t *testing.T, what string, err error, queue string) {
	t.Helper()
	if !errors.Is(err, conveyor.ErrQueueFull) {
		t.Fatalf("%s: %v, want ErrQueueFull", what, err)
	}
	if errors.Is(err, conveyor.ErrInvalidArgument) || !strings.Contains(err.Error(), `"`+queue+`"`) {
		t.Fatalf("%s: %v does not name queue %q", what, err, queue)
	}
}

// TestEnqueueQueueFull: a task refused by its queue's bound, after the
// call's wait, matches ErrQueueFull, from Enqueue, EnqueueBatch and
// EnqueueTx alike.
func TestEnqueueQueueFull(t *testing.T) {
	t.Parallel()
	e := batchSetup(t, conveyor.WithEnqueueBatching(false))
	boundQueue(t, e.srv.URL(), "b", 1)
	if _, err := e.c.Enqueue(t.Context(), "t", nil, conveyor.Queue("b")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	_, err := e.c.Enqueue(ctx, "t", nil, conveyor.Queue("b"))
	requireQueueFull(t, "Enqueue", err, "b")
	res, err := e.c.EnqueueBatch(ctx, []*conveyor.Task{conveyor.NewTask("t", nil, conveyor.Queue("other")), conveyor.NewTask("t", nil, conveyor.Queue("b"))})
	if err != nil || res[0].Err != nil {
		t.Fatalf("EnqueueBatch = %v, %v", res, err)
	}
	requireQueueFull(t, "EnqueueBatch's item", res[1].Err, "b")
	_, err = e.c.EnqueueTx(ctx, []*conveyor.Task{conveyor.NewTask("t", nil, conveyor.Queue("b"))})
	requireQueueFull(t, "EnqueueTx", err, "b")
}

// TestEnqueueBatchedQueueFull: Enqueue calls that share one EnqueueBatch
// each get their own outcome: stored while there is room, ErrQueueFull
// after, within their deadlines (the shared RPC waits for room only as
// long as its callers' deadlines allow).
func TestEnqueueBatchedQueueFull(t *testing.T) {
	t.Parallel()
	e := batchSetup(t, conveyor.WithEnqueueInFlight(1))
	const room, calls = 5, 20
	boundQueue(t, e.srv.URL(), "b", room)
	release := e.holdFirst()
	// A deadline shorter than the server's longest wait (5 s): the calls
	// get their refusal only if the shared RPC carries it.
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Second)
	defer cancel()
	outs := make([]<-chan enqueued, calls)
	for i := range outs {
		outs[i] = e.go_(ctx, "t", nil, conveyor.Queue("b"))
	}
	e.waitGathered(calls)
	if r := release(); r.err != nil {
		t.Fatalf("the first Enqueue: %v", r.err)
	}
	stored := 0
	for i, ch := range outs {
		r := wtRecv(t, ch, 10*time.Second, "a batched call's outcome")
		if r.err == nil {
			stored++
			continue
		}
		requireQueueFull(t, fmt.Sprintf("batched call %d", i), r.err, "b")
	}
	if stored != room {
		t.Fatalf("%d batched calls stored into a queue with room for %d", stored, room)
	}
	if n := e.gate.count("EnqueueBatch"); n != 1 {
		t.Fatalf("%d EnqueueBatch RPCs, want the calls to share one", n)
	}
}
