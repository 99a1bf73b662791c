package main

import (
	"context"
	"strings"
	"syscall"
	"testing"

	"connectrpc.com/connect"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/gen/conveyor/v1/conveyorv1connect"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

// authorizingWorker is a raw session that asks before it starts.
type authorizingWorker struct {
	t      *testing.T
	stream *connect.BidiStreamForClient[conveyorv1.WorkerMessage, conveyorv1.ServerMessage]
}

func openAuthorizingWorker(t *testing.T, url string) *authorizingWorker {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	stream := conveyorv1connect.NewWorkerServiceClient(servertest.HTTPClient(), url, connect.WithGRPC()).Session(ctx)
	hello := &conveyorv1.Hello{Queues: map[string]int32{"default": 1}, Concurrency: 4, StartAuthorization: true}
	if err := stream.Send(&conveyorv1.WorkerMessage{Frame: &conveyorv1.WorkerMessage_Hello{Hello: hello}}); err != nil {
		t.Fatal(err)
	}
	if m, err := stream.Receive(); err != nil || m.GetWelcome() == nil {
		t.Fatalf("no Welcome: %v %v", m, err)
	}
	return &authorizingWorker{t: t, stream: stream}
}

// next returns the next frame that f picks out, skipping the others.
func next[T any](w *authorizingWorker, f func(*conveyorv1.ServerMessage) *T) *T {
	w.t.Helper()
	for {
		m, err := w.stream.Receive()
		if err != nil {
			w.t.Fatalf("stream: %v", err)
		}
		if v := f(m); v != nil {
			return v
		}
	}
}

// TestAtMostOnceSurvivesSIGKILL: a server SIGKILLed while an at-most-once
// task's authorized attempt runs archives it at the restart, outcome
// unknown, and never delivers it again; a task dispatched but not yet
// authorized is delivered again.
func TestAtMostOnceSurvivesSIGKILL(t *testing.T) {
	dataDir := t.TempDir()
	child := startChild(t, dataDir)
	c := clientsOf(child)
	w := openAuthorizingWorker(t, child.url)
	started := c.enqueue(t, &conveyorv1.EnqueueRequest{Type: "pay", Options: &conveyorv1.TaskOptions{AtMostOnce: true}})
	d := next(w, (*conveyorv1.ServerMessage).GetDispatch)
	if d.GetTask().GetId() != started.GetId() || !d.GetStartRequired() {
		t.Fatalf("dispatch %v", d)
	}
	if err := w.stream.Send(&conveyorv1.WorkerMessage{Frame: &conveyorv1.WorkerMessage_Start{Start: &conveyorv1.Start{AttemptId: d.GetAttemptId()}}}); err != nil {
		t.Fatal(err)
	}
	if dec := next(w, (*conveyorv1.ServerMessage).GetStartDecision); !dec.GetAuthorized() {
		t.Fatalf("decision %v", dec)
	}
	waiting := c.enqueue(t, &conveyorv1.EnqueueRequest{Type: "pay", Options: &conveyorv1.TaskOptions{AtMostOnce: true}})
	if d := next(w, (*conveyorv1.ServerMessage).GetDispatch); d.GetTask().GetId() != waiting.GetId() {
		t.Fatalf("dispatch %v, want %s", d, waiting.GetId())
	}
	if err := child.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = child.cmd.Wait()

	child = startChild(t, dataDir)
	c = clientsOf(child)
	ctx := context.Background()
	res, err := c.tasks.GetTask(ctx, connect.NewRequest(&conveyorv1.GetTaskRequest{Id: started.GetId()}))
	if err != nil {
		t.Fatal(err)
	}
	if res.Msg.GetState() != conveyorv1.TaskState_TASK_STATE_ARCHIVED || !strings.HasPrefix(res.Msg.GetLastError(), "outcome unknown:") {
		t.Fatalf("the authorized task after the restart: %v %q, want ARCHIVED, outcome unknown", res.Msg.GetState(), res.Msg.GetLastError())
	}
	w = openAuthorizingWorker(t, child.url)
	if d := next(w, (*conveyorv1.ServerMessage).GetDispatch); d.GetTask().GetId() != waiting.GetId() || d.GetTask().GetRetried() != 0 {
		t.Fatalf("after the restart the worker got %v, want %s again, retried 0", d, waiting.GetId())
	}
}
