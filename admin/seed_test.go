package admin_test

// The data the browser tests look at, made through the Go SDK and the
// AdminService client as any producer, worker or operator would.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/gen/conveyor/v1/conveyorv1connect"
	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

// testBundle is a running server and clients of it.
type testBundle struct {
	srv    *servertest.Server
	url    string
	token  string
	client *conveyor.Client
	admin  conveyorv1connect.AdminServiceClient
}

// setup starts a server (with token as its bearer token; "" for none) and
// returns clients of it.
func setup(t *testing.T, token string) *testBundle {
	t.Helper()
	srv := servertest.Start(t, server.Config{Token: token})
	url := srv.URL()
	client, err := conveyor.NewClient(url, conveyor.WithToken(token))
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	hc := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(hc.CloseIdleConnections)
	var opts []connect.ClientOption
	if token != "" {
		opts = append(opts, servertest.BearerToken(token))
	}
	return &testBundle{
		srv:    srv,
		url:    url,
		token:  token,
		client: client,
		admin:  conveyorv1connect.NewAdminServiceClient(hc, url, opts...),
	}
}

// ctx is a context for one call of a test's setup.
func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), stepTimeout)
	t.Cleanup(cancel)
	return c
}

// enqueue enqueues n tasks of typ into queue, with JSON payloads.
func (b *testBundle) enqueue(t *testing.T, queue, typ string, n int, opts ...conveyor.TaskOption) []string {
	t.Helper()
	tasks := make([]*conveyor.Task, n)
	for i := range tasks {
		payload := fmt.Sprintf(`{"n":%d,"to":"user%d@example.com","id":12345678901234567890}`, i, i)
		tasks[i] = conveyor.NewTask(typ, []byte(payload), append([]conveyor.TaskOption{conveyor.Queue(queue)}, opts...)...)
	}
	ids := make([]string, 0, n)
	for start := 0; start < n; start += 1000 {
		end := min(start+1000, n)
		res, err := b.client.EnqueueBatch(ctx(t), tasks[start:end])
		if err != nil {
			t.Fatalf("EnqueueBatch: %v", err)
		}
		for _, r := range res {
			if r.Err != nil {
				t.Fatalf("EnqueueBatch item: %v", r.Err)
			}
			ids = append(ids, r.Task.ID)
		}
	}
	return ids
}

// queue is the server's view of one queue.
func (b *testBundle) queue(t *testing.T, name string) *conveyorv1.QueueInfo {
	t.Helper()
	res, err := b.admin.ListQueues(ctx(t), connect.NewRequest(&conveyorv1.ListQueuesRequest{}))
	if err != nil {
		t.Fatalf("ListQueues: %v", err)
	}
	for _, q := range res.Msg.GetQueues() {
		if q.GetName() == name {
			return q
		}
	}
	t.Fatalf("no queue %q", name)
	return nil
}

// enqueued is how many tasks were ever enqueued into queue; 0 before its
// first.
func (b *testBundle) enqueued(t *testing.T, name string) int64 {
	t.Helper()
	res, err := b.admin.ListQueues(ctx(t), connect.NewRequest(&conveyorv1.ListQueuesRequest{}))
	if err != nil {
		t.Fatalf("ListQueues: %v", err)
	}
	for _, q := range res.Msg.GetQueues() {
		if q.GetName() == name {
			return q.GetEnqueued()
		}
	}
	return 0
}

// waitState polls the task until it reaches state.
func (b *testBundle) waitState(t *testing.T, id string, state conveyor.TaskState) *conveyor.TaskInfo {
	t.Helper()
	var info *conveyor.TaskInfo
	servertest.Eventually(t, stepTimeout, fmt.Sprintf("task %s reaches state %v", id, state), func() bool {
		var err error
		info, err = b.client.GetTask(context.Background(), id)
		if err != nil {
			t.Fatalf("GetTask %s: %v", id, err)
		}
		return info.State == state
	})
	return info
}

// startWorker connects a worker session serving "reports" and "media", and
// stops it at cleanup: a report whose payload asks for it fails for good,
// others succeed with progress and a result; an image resize runs until
// the test ends.
func (b *testBundle) startWorker(t *testing.T) {
	t.Helper()
	release := make(chan struct{})
	w, err := conveyor.NewWorker(b.url,
		conveyor.WithToken(b.token),
		conveyor.WithQueue("reports", 3),
		conveyor.WithQueue("media", 1),
		conveyor.WithQueue("traffic", 1),
		conveyor.WithConcurrency(4),
		conveyor.WithLabels(map[string]string{"region": "eu-west", "host": "worker-1"}),
	)
	if err != nil {
		t.Fatalf("NewWorker: %v", err)
	}
	w.HandleFunc("report:build", func(_ context.Context, dl *conveyor.Delivery) error {
		if strings.Contains(string(dl.Payload), `"fail"`) {
			return conveyor.SkipRetry(errors.New("disk full: cannot write /var/reports/q4.pdf"))
		}
		dl.Progress(100, "rendered")
		dl.SetResult([]byte(`{"pages":12,"url":"/reports/q4.pdf"}`))
		return nil
	})
	var pings atomic.Int64
	w.HandleFunc("ping", func(context.Context, *conveyor.Delivery) error {
		if pings.Add(1)%8 == 0 { // one in eight fails, and is retried once
			return errors.New("upstream timed out")
		}
		return nil
	})
	w.HandleFunc("image:resize", func(ctx context.Context, dl *conveyor.Delivery) error {
		dl.Progress(40, "resizing 3 of 8")
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	})
	stop := runWorker(t, w)
	t.Cleanup(func() {
		close(release)
		stop()
	})
}

// worker is a Go SDK worker of the test's server that serves queue.
func (b *testBundle) worker(t *testing.T, queue string) *conveyor.Worker {
	t.Helper()
	w, err := conveyor.NewWorker(b.url, conveyor.WithToken(b.token), conveyor.WithQueue(queue, 1))
	if err != nil {
		t.Fatalf("NewWorker: %v", err)
	}
	return w
}

// runWorker runs w until stop is called, which shuts it down (waiting for
// its handlers, 20 s at most) and fails the test if it ended otherwise.
func runWorker(t *testing.T, w *conveyor.Worker) (stop func()) {
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(runCtx) }()
	return func() {
		t.Helper()
		sctx, scancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer scancel()
		_ = w.Shutdown(sctx)
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("worker: %v", err)
		}
	}
}

// traffic enqueues a few "ping" tasks into the queue "traffic" every 100 ms
// until the test ends, so that the throughput chart has lines to draw.
func (b *testBundle) traffic(t *testing.T) {
	t.Helper()
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			tasks := make([]*conveyor.Task, 3+i%4)
			for j := range tasks {
				tasks[j] = conveyor.NewTask("ping", []byte(fmt.Sprintf(`{"n":%d}`, i*10+j)), conveyor.Queue("traffic"), conveyor.MaxRetry(1))
			}
			_, _ = b.client.EnqueueBatch(context.Background(), tasks)
		}
	}()
	t.Cleanup(func() {
		close(stop)
		<-done
	})
}

// releases connects two sessions of two releases, the older one drained,
// serving "emails" and "billing" for task types that nothing there
// enqueues (email:digest waits an hour): they show on the workers page,
// and leave emails' email:send to no worker.
func (b *testBundle) releases(t *testing.T) {
	t.Helper()
	const older, newer = "2026.12.01-9f8e7d", "2026.12.05-a1b2c3"
	b.openSession(t, &conveyorv1.Hello{Queues: map[string]int32{"emails": 1}, Concurrency: 4, SdkVersion: "v0.1.0",
		Labels: map[string]string{"region": "eu-west", "host": "worker-2"}, ReleaseId: older, Types: []string{"email:digest"}})
	b.openSession(t, &conveyorv1.Hello{Queues: map[string]int32{"emails": 1, "billing": 2}, Concurrency: 8, SdkVersion: "v0.1.0",
		Labels: map[string]string{"region": "us-east", "host": "worker-3"}, ReleaseId: newer,
		Types: []string{"email:digest", "invoice:charge"}, StartAuthorization: true})
	if _, err := b.admin.DrainRelease(ctx(t), connect.NewRequest(&conveyorv1.DrainReleaseRequest{ReleaseId: older})); err != nil {
		t.Fatalf("DrainRelease: %v", err)
	}
}
