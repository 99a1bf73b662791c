package conveyor_test

import (
	"context"
	"strings"
	"testing"

	"connectrpc.com/connect"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/gen/conveyor/v1/conveyorv1connect"
	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

// TestQueueNameRuleIsTheServers pins the Worker's check of its queues to
// the server's: for every name and weight of the table, NewWorker accepts
// the queue exactly when a real server welcomes a Hello that serves it,
// and, for a name, exactly when the server accepts an enqueue into it.
func TestQueueNameRuleIsTheServers(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	client := conveyorv1connect.NewWorkerServiceClient(servertest.HTTPClient(), s.URL(), connect.WithGRPC())
	tasks := conveyorv1connect.NewTaskServiceClient(servertest.HTTPClient(), s.URL(), connect.WithGRPC())
	long := func(n int) string { return strings.Repeat("q", n) }
	names := []string{
		"", "a", "Z", "7", "default", "a-b_c.d", "a.", "a-", "a_", "a..b", "0-0",
		"-a", "_a", ".a", "a b", " a", "a/b", "a:b", "a\n", "a\x00", "a+b", "a@b", "é", "aé", "a€", "日本",
		long(server.MaxNameBytes), long(server.MaxNameBytes + 1), "a" + strings.Repeat("-", server.MaxNameBytes-1),
		"a" + strings.Repeat(".", server.MaxNameBytes), long(64 << 10),
	}
	for _, name := range names {
		sdk := newWorkerErr(s, name, 1) == nil
		if hello := helloWelcomed(t, client, name, 1); sdk != hello {
			t.Errorf("queue %.40q (%d bytes): the SDK accepts it: %v; the server's Hello: %v", name, len(name), sdk, hello)
		}
		if name == "" {
			continue // an enqueue without a queue goes to "default"
		}
		_, err := tasks.Enqueue(context.Background(), connect.NewRequest(&conveyorv1.EnqueueRequest{Queue: name, Type: "t"}))
		if enqueued := err == nil; sdk != enqueued {
			t.Errorf("queue %.40q (%d bytes): the SDK accepts it: %v; the server's Enqueue: %v (%v)", name, len(name), sdk, enqueued, err)
		}
	}
	for _, weight := range []int32{-1 << 31, -1, 0, 1, 2, 1<<31 - 1} {
		sdk := newWorkerErr(s, "q", weight) == nil
		if hello := helloWelcomed(t, client, "q", weight); sdk != hello {
			t.Errorf("weight %d: the SDK accepts it: %v; the server's Hello: %v", weight, sdk, hello)
		}
	}
}

// newWorkerErr is NewWorker's error for a Worker of one queue.
func newWorkerErr(s *servertest.Server, name string, weight int32) error {
	_, err := conveyor.NewWorker(s.URL(), conveyor.WithQueues(map[string]int32{name: weight}))
	return err
}

// helloWelcomed reports whether the server answers a Hello serving one
// queue with a Welcome. The session ends at once either way.
func helloWelcomed(t *testing.T, client conveyorv1connect.WorkerServiceClient, name string, weight int32) bool {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream := client.Session(ctx)
	hello := &conveyorv1.Hello{Queues: map[string]int32{name: weight}, Concurrency: 1, SdkVersion: "rules-test"}
	if err := stream.Send(&conveyorv1.WorkerMessage{Frame: &conveyorv1.WorkerMessage_Hello{Hello: hello}}); err != nil {
		t.Fatalf("send the Hello: %v", err)
	}
	m, err := stream.Receive()
	if err == nil && m.GetWelcome() == nil {
		t.Fatalf("the server's first frame is %v, want a Welcome", m)
	}
	if err != nil && connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("the Hello failed with %v, want a Welcome or invalid_argument", err)
	}
	_ = stream.CloseRequest()
	_ = stream.CloseResponse()
	return err == nil
}
