package server_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/oklog/ulid/v2"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/gen/conveyor/v1/conveyorv1connect"
	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

// rawWorker drives a session frame by frame, as an SDK author would.
type rawWorker struct {
	t      *testing.T
	stream *connect.BidiStreamForClient[conveyorv1.WorkerMessage, conveyorv1.ServerMessage]
	frames chan *conveyorv1.ServerMessage
	end    chan error
}

func openSession(t *testing.T, s *servertest.Server, p servertest.Protocol, hello *conveyorv1.Hello) (*rawWorker, *conveyorv1.Welcome, error) {
	t.Helper()
	return openSessionWith(t, s, hello, p.ClientOption())
}

// openSessionWith opens a session with the client options given (a
// protocol, a token).
func openSessionWith(t *testing.T, s *servertest.Server, hello *conveyorv1.Hello, opts ...connect.ClientOption) (*rawWorker, *conveyorv1.Welcome, error) {
	t.Helper()
	client := conveyorv1connect.NewWorkerServiceClient(servertest.HTTPClient(), s.URL(), opts...)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	stream := client.Session(ctx)
	w := &rawWorker{t: t, stream: stream, frames: make(chan *conveyorv1.ServerMessage, 1024), end: make(chan error, 1)}
	if err := stream.Send(&conveyorv1.WorkerMessage{Frame: &conveyorv1.WorkerMessage_Hello{Hello: hello}}); err != nil {
		return nil, nil, err
	}
	go func() {
		for {
			m, err := stream.Receive()
			if err != nil {
				w.end <- err
				close(w.frames)
				return
			}
			w.frames <- m
		}
	}()
	select {
	case m, ok := <-w.frames:
		if !ok {
			return nil, nil, <-w.end
		}
		if m.GetWelcome() == nil {
			t.Fatalf("first server frame is %v, want Welcome", m)
		}
		return w, m.GetWelcome(), nil
	case <-time.After(10 * time.Second):
		t.Fatal("no Welcome")
	}
	return nil, nil, nil
}

func (w *rawWorker) next(timeout time.Duration) *conveyorv1.ServerMessage {
	w.t.Helper()
	select {
	case m, ok := <-w.frames:
		if !ok {
			w.t.Fatalf("stream ended: %v", <-w.end)
		}
		return m
	case <-time.After(timeout):
		w.t.Fatalf("no frame within %s", timeout)
	}
	return nil
}

func (w *rawWorker) send(m *conveyorv1.WorkerMessage) {
	w.t.Helper()
	if err := w.stream.Send(m); err != nil {
		w.t.Fatalf("send: %v", err)
	}
}

func TestSessionDispatchAndResult(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	tasks := taskClient(t, s, servertest.GRPC)
	ctx := context.Background()
	res, err := tasks.Enqueue(ctx, connect.NewRequest(&conveyorv1.EnqueueRequest{Type: "t", Payload: []byte("p")}))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []servertest.Protocol{servertest.GRPC, servertest.Connect} {
		w, welcome, err := openSession(t, s, p, &conveyorv1.Hello{Queues: map[string]int32{"default": 1}, Concurrency: 2, SdkVersion: "test"})
		if err != nil {
			t.Fatal(err)
		}
		if welcome.GetLeaseTtl().AsDuration() != 60*time.Second || welcome.GetHeartbeatInterval().AsDuration() != 20*time.Second {
			t.Errorf("welcome %v", welcome)
		}
		if p == servertest.GRPC {
			d := w.next(10 * time.Second).GetDispatch()
			if d.GetTask().GetId() != res.Msg.GetTask().GetId() || string(d.GetTask().GetPayload()) != "p" ||
				d.GetTask().GetMaxRetry() != 25 || d.GetTask().GetPriority() != 4 {
				t.Fatalf("dispatch %v", d)
			}
			w.send(&conveyorv1.WorkerMessage{Frame: &conveyorv1.WorkerMessage_Result{Result: &conveyorv1.Result{
				TaskId: d.GetTask().GetId(), Outcome: conveyorv1.TaskOutcome_TASK_OUTCOME_SUCCESS, Result: []byte("done")}}})
			servertest.Eventually(t, 10*time.Second, "task completed", func() bool {
				got, err := tasks.GetTask(ctx, connect.NewRequest(&conveyorv1.GetTaskRequest{Id: d.GetTask().GetId()}))
				return err == nil && got.Msg.GetState() == conveyorv1.TaskState_TASK_STATE_COMPLETED && string(got.Msg.GetResult()) == "done"
			})
		}
		if err := w.stream.CloseRequest(); err != nil {
			t.Fatal(err)
		}
		if err := <-w.end; !errors.Is(err, io.EOF) {
			t.Fatalf("stream end after close: %v", err)
		}
	}
}

func TestHelloValidation(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	cases := []struct {
		name  string
		hello *conveyorv1.Hello
		msg   string
	}{
		{"no queues", &conveyorv1.Hello{Concurrency: 1}, "at least one queue"},
		{"bad queue name", &conveyorv1.Hello{Queues: map[string]int32{"a b": 1}, Concurrency: 1}, "queue name"},
		{"zero weight", &conveyorv1.Hello{Queues: map[string]int32{"a": 0}, Concurrency: 1}, "weight"},
		{"zero concurrency", &conveyorv1.Hello{Queues: map[string]int32{"a": 1}}, "concurrency"},
		{"server too old", &conveyorv1.Hello{Queues: map[string]int32{"a": 1}, Concurrency: 1, MinServerVersion: "v99.0.0"}, "requires at least"},
	}
	for _, tc := range cases {
		_, _, err := openSession(t, s, servertest.GRPC, tc.hello)
		if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: %v, want invalid_argument mentioning %q", tc.name, err, tc.msg)
		}
	}
	// Non-semver versions are admitted.
	w, _, err := openSession(t, s, servertest.GRPC, &conveyorv1.Hello{Queues: map[string]int32{"a": 1}, Concurrency: 1, SdkVersion: "dev", MinServerVersion: "not-semver"})
	if err != nil {
		t.Fatal(err)
	}
	_ = w.stream.CloseRequest()
}

// TestHelloQueueNameBounds: a queue name over 1024 bytes is refused with
// invalid_argument saying so, and no message quotes more than a short
// prefix of what the client sent: a 12 MiB name once came back in the
// grpc-message header, which the client's HPACK decoder refused, so the
// worker saw a broken connection (internal, transient) instead.
func TestHelloQueueNameBounds(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	cases := []struct {
		name, queue string
		want        []string
	}{
		{"2000 bytes", strings.Repeat("a", 2000), []string{"hello.queues", "2000 bytes", "the limit is 1024"}},
		{"12 MiB", strings.Repeat("a", 12<<20), []string{"hello.queues", "the limit is 1024"}},
		{"invalid, long", strings.Repeat("a b", 300), []string{"hello.queues", "is invalid", "must match"}},
	}
	for _, tc := range cases {
		_, _, err := openSession(t, s, servertest.GRPC, &conveyorv1.Hello{Queues: map[string]int32{tc.queue: 1}, Concurrency: 1})
		var ce *connect.Error
		if !errors.As(err, &ce) || ce.Code() != connect.CodeInvalidArgument {
			t.Errorf("%s: %v, want invalid_argument", tc.name, err)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(ce.Message(), w) {
				t.Errorf("%s: message %.200q, want it to say %q", tc.name, ce.Message(), w)
			}
		}
		if len(ce.Message()) > 200 {
			t.Errorf("%s: the message is %d bytes, want a short one", tc.name, len(ce.Message()))
		}
	}
}

func TestFirstFrameMustBeHello(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	client := conveyorv1connect.NewWorkerServiceClient(servertest.HTTPClient(), s.URL(), connect.WithGRPC())
	stream := client.Session(context.Background())
	if err := stream.Send(&conveyorv1.WorkerMessage{Frame: &conveyorv1.WorkerMessage_Heartbeat{Heartbeat: &conveyorv1.Heartbeat{}}}); err != nil {
		t.Fatal(err)
	}
	_, err := stream.Receive()
	if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "got heartbeat") {
		t.Fatalf("heartbeat first: %v, want invalid_argument naming the heartbeat frame", err)
	}
}

// TestSessionToleratesUnknownIDs sends Result, Progress and Heartbeat
// frames for tasks the session does not hold: they are dropped and the
// stream carries on.
func TestSessionToleratesUnknownIDs(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	w, _, err := openSession(t, s, servertest.GRPC, &conveyorv1.Hello{Queues: map[string]int32{"default": 1}, Concurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	unknown := ulid.Make().String()
	w.send(&conveyorv1.WorkerMessage{Frame: &conveyorv1.WorkerMessage_Result{Result: &conveyorv1.Result{TaskId: unknown, Outcome: conveyorv1.TaskOutcome_TASK_OUTCOME_SUCCESS}}})
	w.send(&conveyorv1.WorkerMessage{Frame: &conveyorv1.WorkerMessage_Result{Result: &conveyorv1.Result{TaskId: "not-an-id"}}})
	w.send(&conveyorv1.WorkerMessage{Frame: &conveyorv1.WorkerMessage_Progress{Progress: &conveyorv1.Progress{TaskId: unknown, Percent: 50}}})
	w.send(&conveyorv1.WorkerMessage{Frame: &conveyorv1.WorkerMessage_Heartbeat{Heartbeat: &conveyorv1.Heartbeat{ActiveTaskIds: []string{unknown, ""}}}})
	w.send(&conveyorv1.WorkerMessage{}) // an empty frame, as from a newer worker
	// The session still works: a task enqueued now is dispatched to it.
	tasks := taskClient(t, s, servertest.GRPC)
	res, err := tasks.Enqueue(context.Background(), connect.NewRequest(&conveyorv1.EnqueueRequest{Type: "t"}))
	if err != nil {
		t.Fatal(err)
	}
	if d := w.next(10 * time.Second).GetDispatch(); d.GetTask().GetId() != res.Msg.GetTask().GetId() {
		t.Fatalf("after unknown ids, got %v, want the dispatch of %s", d, res.Msg.GetTask().GetId())
	}
}

func TestCreditBounds(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	for _, tc := range []struct {
		n    int32
		fail bool
	}{{1, false}, {3, false}, {0, true}, {-1, true}, {4, true}} {
		w, _, err := openSession(t, s, servertest.GRPC, &conveyorv1.Hello{Queues: map[string]int32{"credit": 1}, Concurrency: 3})
		if err != nil {
			t.Fatal(err)
		}
		// A failing Credit ends the stream at once, so later sends may fail:
		// only the end of the stream is checked.
		_ = w.stream.Send(&conveyorv1.WorkerMessage{Frame: &conveyorv1.WorkerMessage_Credit{Credit: &conveyorv1.Credit{N: tc.n}}})
		if !tc.fail {
			// A Heartbeat after the Credit proves the stream is still read.
			w.send(&conveyorv1.WorkerMessage{Frame: &conveyorv1.WorkerMessage_Heartbeat{Heartbeat: &conveyorv1.Heartbeat{}}})
		}
		_ = w.stream.CloseRequest()
		err = <-w.end
		if tc.fail {
			if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "credit.n") {
				t.Errorf("Credit{%d} with concurrency 3: %v, want invalid_argument naming credit.n", tc.n, err)
			}
		} else if !errors.Is(err, io.EOF) {
			t.Errorf("Credit{%d} with concurrency 3 ended the stream: %v", tc.n, err)
		}
	}
}
