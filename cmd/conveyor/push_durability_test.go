package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/conveyor-dev/conveyor/broker"
	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

// TestPushSurvivesSIGKILL: a server SIGKILLed while its push endpoint
// runs a task invokes the endpoint with the task again after the
// restart, under a new attempt id, and counts the interrupted attempt
// (the endpoint may have run it), with its error in the task's history.
func TestPushSurvivesSIGKILL(t *testing.T) {
	dataDir := t.TempDir()
	first := make(chan struct{})
	var mu sync.Mutex
	var attempts []string
	ep := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Read first: the server notices a closed connection only then.
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		attempts = append(attempts, r.Header.Get("webhook-id"))
		n := len(attempts)
		mu.Unlock()
		if n == 1 {
			close(first)
			<-r.Context().Done() // the server dies holding this request
			return
		}
		b, _ := protojson.Marshal(&conveyorv1.PushResponse{Outcome: conveyorv1.TaskOutcome_TASK_OUTCOME_SUCCESS, Result: []byte("ran")})
		_, _ = w.Write(b)
	}))
	t.Cleanup(ep.Close)

	child := startChild(t, dataDir)
	c := clientsOf(child)
	ctx := context.Background()
	if _, err := c.admin.UpdateQueueConfig(ctx, connect.NewRequest(&conveyorv1.UpdateQueueConfigRequest{
		Config: &conveyorv1.QueueConfig{Queue: "hooks", Push: &conveyorv1.PushEndpoint{Url: ep.URL, Timeout: durationpb.New(time.Second)}}})); err != nil {
		t.Fatal(err)
	}
	task := c.enqueue(t, &conveyorv1.EnqueueRequest{Queue: "hooks", Type: "charge", Payload: []byte(`{}`)})
	select {
	case <-first:
	case <-time.After(30 * time.Second):
		t.Fatal("the endpoint was not invoked")
	}
	// The lease's write is in a group commit the request does not wait
	// for (docs/push.md): an acknowledged enqueue after it commits after it.
	c.enqueue(t, &conveyorv1.EnqueueRequest{Queue: "other", Type: "sync", Payload: []byte(`{}`)})
	if err := child.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = child.cmd.Wait()

	c = clientsOf(startChild(t, dataDir))
	var got *conveyorv1.TaskInfo
	servertest.Eventually(t, 60*time.Second, "the task completes after the restart", func() bool {
		res, err := c.tasks.GetTask(ctx, connect.NewRequest(&conveyorv1.GetTaskRequest{Id: task.GetId()}))
		if err != nil {
			return false
		}
		got = res.Msg
		return got.GetState() == conveyorv1.TaskState_TASK_STATE_COMPLETED
	})
	if string(got.GetResult()) != "ran" {
		t.Fatalf("after the restart the task's result is %q", got.GetResult())
	}
	if got.GetRetried() != 1 || len(got.GetErrors()) != 1 || got.GetErrors()[0].GetMessage() != broker.InterruptedPushError {
		t.Fatalf("after the restart: retried %d, errors %v; want the interrupted attempt counted", got.GetRetried(), got.GetErrors())
	}
	mu.Lock()
	defer mu.Unlock()
	if len(attempts) != 2 || attempts[0] == attempts[1] || attempts[0] == "" {
		t.Fatalf("the endpoint saw attempts %q, want two distinct", attempts)
	}
}
