package conveyor_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/gen/conveyor/v1/conveyorv1connect"
	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

// wtEnv is a real server with raw generated clients, for worker tests (the
// SDK's Client is not used, so these tests exercise the worker alone).
type wtEnv struct {
	t     *testing.T
	srv   *servertest.Server
	tasks conveyorv1connect.TaskServiceClient
	admin conveyorv1connect.AdminServiceClient
}

func wtSetup(t *testing.T, cfg server.Config) *wtEnv {
	t.Helper()
	e := &wtEnv{t: t, srv: servertest.Start(t, cfg)}
	e.connect()
	return e
}

func (e *wtEnv) connect() {
	e.tasks = conveyorv1connect.NewTaskServiceClient(servertest.HTTPClient(), e.srv.URL(), connect.WithGRPC(), servertest.BearerToken(e.srv.Config.Token))
	e.admin = conveyorv1connect.NewAdminServiceClient(servertest.HTTPClient(), e.srv.URL(), connect.WithGRPC(), servertest.BearerToken(e.srv.Config.Token))
}

// wtReq builds an EnqueueRequest.
func wtReq(queue, typ, payload string, opts *conveyorv1.TaskOptions) *conveyorv1.EnqueueRequest {
	return &conveyorv1.EnqueueRequest{Queue: queue, Type: typ, Payload: []byte(payload), Options: opts}
}

func (e *wtEnv) enqueue(req *conveyorv1.EnqueueRequest) string {
	e.t.Helper()
	res, err := e.tasks.Enqueue(context.Background(), connect.NewRequest(req))
	if err != nil {
		e.t.Fatalf("enqueue: %v", err)
	}
	return res.Msg.GetTask().GetId()
}

func (e *wtEnv) enqueueAll(reqs []*conveyorv1.EnqueueRequest) []string {
	e.t.Helper()
	var ids []string
	for len(reqs) > 0 {
		n := min(len(reqs), server.MaxBatchItems)
		res, err := e.tasks.EnqueueBatch(context.Background(), connect.NewRequest(&conveyorv1.EnqueueBatchRequest{Items: reqs[:n]}))
		if err != nil {
			e.t.Fatalf("enqueue batch: %v", err)
		}
		for i, r := range res.Msg.GetResults() {
			if r.GetError() != "" {
				e.t.Fatalf("enqueue item %d: %s", i, r.GetError())
			}
			ids = append(ids, r.GetTask().GetId())
		}
		reqs = reqs[n:]
	}
	return ids
}

func (e *wtEnv) get(id string) *conveyorv1.TaskInfo {
	e.t.Helper()
	res, err := e.tasks.GetTask(context.Background(), connect.NewRequest(&conveyorv1.GetTaskRequest{Id: id}))
	if err != nil {
		e.t.Fatalf("get task %s: %v", id, err)
	}
	return res.Msg
}

// waitState waits for task id to reach state and returns it.
func (e *wtEnv) waitState(id string, state conveyorv1.TaskState, timeout time.Duration) *conveyorv1.TaskInfo {
	e.t.Helper()
	var info *conveyorv1.TaskInfo
	servertest.Eventually(e.t, timeout, fmt.Sprintf("task %s reaches %s", id, state), func() bool {
		info = e.get(id)
		return info.GetState() == state
	})
	return info
}

func (e *wtEnv) queue(name string) *conveyorv1.QueueInfo {
	e.t.Helper()
	res, err := e.admin.ListQueues(context.Background(), connect.NewRequest(&conveyorv1.ListQueuesRequest{}))
	if err != nil {
		e.t.Fatalf("list queues: %v", err)
	}
	for _, q := range res.Msg.GetQueues() {
		if q.GetName() == name {
			return q
		}
	}
	return &conveyorv1.QueueInfo{Name: name}
}

// newWorker returns a Worker for the test server; the connection options
// come first, so opts may override them.
func (e *wtEnv) newWorker(opts ...conveyor.WorkerOption) *conveyor.Worker {
	e.t.Helper()
	return wtNewWorker(e.t, e.srv.URL(), opts...)
}

func wtNewWorker(t *testing.T, url string, opts ...conveyor.WorkerOption) *conveyor.Worker {
	t.Helper()
	all := []conveyor.WorkerOption{conveyor.WithLogger(wtLogger(t)), conveyor.WithReconnectBackoff(20*time.Millisecond, 200*time.Millisecond)}
	w, err := conveyor.NewWorker(url, append(all, opts...)...)
	if err != nil {
		t.Fatalf("NewWorker: %v", err)
	}
	return w
}

// wtLogger logs to the test in verbose mode, and nowhere otherwise.
func wtLogger(t *testing.T) *slog.Logger {
	if !testing.Verbose() {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(&wtTestWriter{t: t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type wtTestWriter struct {
	mu   sync.Mutex
	t    *testing.T
	done bool
}

func (w *wtTestWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimSpace(string(p)))
	}
	return len(p), nil
}

// wtRunning is a Worker whose Run is in progress.
type wtRunning struct {
	w    *conveyor.Worker
	done chan struct{}
	err  error
}

// wtRun starts w.Run; at cleanup the worker is closed.
func wtRun(t *testing.T, w *conveyor.Worker) *wtRunning {
	r := &wtRunning{w: w, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		r.err = w.Run(context.Background())
	}()
	t.Cleanup(func() {
		_ = w.Close()
		<-r.done
	})
	return r
}

// wait waits for Run to return and returns its error.
func (r *wtRunning) wait(t *testing.T, timeout time.Duration) error {
	t.Helper()
	select {
	case <-r.done:
		return r.err
	case <-time.After(timeout):
		t.Fatalf("Run did not return within %s", timeout)
		return nil
	}
}

// wtRecv waits for a value on ch.
func wtRecv[T any](t *testing.T, ch <-chan T, timeout time.Duration, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(timeout):
		t.Fatalf("timed out after %s waiting for %s", timeout, what)
		var zero T
		return zero
	}
}

func TestWorkerConcurrencyBound(t *testing.T) {
	t.Parallel()
	e := wtSetup(t, server.Config{})
	const n, concurrency = 200, 4
	reqs := make([]*conveyorv1.EnqueueRequest, n)
	for i := range reqs {
		reqs[i] = wtReq("load", "work", "{}", nil)
	}
	e.enqueueAll(reqs)

	var running, peak, handled atomic.Int64
	w := e.newWorker(conveyor.WithQueue("load", 1), conveyor.WithConcurrency(concurrency))
	w.HandleFunc("work", func(context.Context, *conveyor.Delivery) error {
		now := running.Add(1)
		for {
			p := peak.Load()
			if now <= p || peak.CompareAndSwap(p, now) {
				break
			}
		}
		time.Sleep(2 * time.Millisecond) // simulated work
		running.Add(-1)
		handled.Add(1)
		return nil
	})
	wtRun(t, w)
	servertest.Eventually(t, 30*time.Second, "all tasks completed", func() bool {
		return e.queue("load").GetCompleted() == n
	})
	if p := peak.Load(); p > concurrency {
		t.Fatalf("peak concurrency %d, want <= %d", p, concurrency)
	} else if p < 2 {
		t.Errorf("peak concurrency %d: the worker never ran tasks in parallel", p)
	}
	if h := handled.Load(); h != n {
		t.Errorf("handled %d tasks, want %d", h, n)
	}
}

func TestWorkerWeightedQueues(t *testing.T) {
	t.Parallel()
	e := wtSetup(t, server.Config{})
	var reqs []*conveyorv1.EnqueueRequest
	for range 300 {
		reqs = append(reqs, wtReq("qa", "pick", "{}", nil), wtReq("qb", "pick", "{}", nil))
	}
	e.enqueueAll(reqs)

	var mu sync.Mutex
	var order []string
	first := make(chan struct{})
	w := e.newWorker(conveyor.WithQueues(map[string]int32{"qa": 3, "qb": 1}), conveyor.WithConcurrency(1))
	w.HandleFunc("pick", func(_ context.Context, d *conveyor.Delivery) error {
		mu.Lock()
		defer mu.Unlock()
		order = append(order, d.Queue)
		if len(order) == 200 {
			close(first)
		}
		return nil
	})
	wtRun(t, w)
	wtRecv(t, first, 30*time.Second, "200 tasks handled")
	mu.Lock()
	defer mu.Unlock()
	a := 0
	for _, q := range order[:200] {
		if q == "qa" {
			a++
		}
	}
	if a < 147 || a > 153 {
		t.Fatalf("of the first 200 tasks %d came from qa (weight 3) and %d from qb (weight 1); want 150:50 ±3", a, 200-a)
	}
}

func TestWorkerPriorityOrder(t *testing.T) {
	t.Parallel()
	e := wtSetup(t, server.Config{})
	prios := []int32{4, 9, 1, 9, 5, 0, 1, 7, 9, 5, 2, 8, 0, 7, 3}
	var reqs []*conveyorv1.EnqueueRequest
	for i, p := range prios {
		reqs = append(reqs, wtReq("prio", "p", fmt.Sprintf(`{"i":%d}`, i), &conveyorv1.TaskOptions{Priority: p}))
	}
	e.enqueueAll(reqs)

	type seen struct {
		prio int32
		i    int
	}
	got := make(chan seen, len(prios))
	w := e.newWorker(conveyor.WithQueue("prio", 1), conveyor.WithConcurrency(1))
	conveyor.HandleJSON(w, "p", func(_ context.Context, d *conveyor.Delivery, v struct{ I int }) error {
		got <- seen{int32(d.Options.Priority), v.I}
		return nil
	})
	wtRun(t, w)
	var order []seen
	for range prios {
		order = append(order, wtRecv(t, got, 20*time.Second, "a task"))
	}
	eff := func(p int32) int32 {
		if p == 0 {
			return 4
		}
		return p
	}
	for k := 1; k < len(order); k++ {
		a, b := order[k-1], order[k]
		if eff(a.prio) < eff(b.prio) || (eff(a.prio) == eff(b.prio) && a.i > b.i) {
			t.Fatalf("handled out of order at %d: %+v then %+v (whole order %+v)", k, a, b, order)
		}
	}
}

func TestWorkerOutcomes(t *testing.T) {
	t.Parallel()
	e := wtSetup(t, server.Config{})
	slow := &conveyorv1.RetryPolicy{Strategy: conveyorv1.RetryStrategy_RETRY_STRATEGY_FIXED, Base: durationpb.New(time.Hour)}
	opts := func() *conveyorv1.TaskOptions { return &conveyorv1.TaskOptions{RetryPolicy: slow} }

	w := e.newWorker(conveyor.WithQueue("out", 1))
	w.HandleFunc("ok", func(_ context.Context, d *conveyor.Delivery) error {
		d.SetResult([]byte("result:" + d.ID))
		return nil
	})
	w.HandleFunc("fail", func(context.Context, *conveyor.Delivery) error { return errors.New("flaky upstream") })
	w.HandleFunc("skip", func(context.Context, *conveyor.Delivery) error {
		return conveyor.SkipRetry(errors.New("bad input"))
	})
	w.HandleFunc("panic", func(context.Context, *conveyor.Delivery) error { panic("boom") })
	w.HandleFunc("slow", func(ctx context.Context, _ *conveyor.Delivery) error {
		<-ctx.Done()
		return ctx.Err()
	})
	conveyor.HandleJSON(w, "json", func(_ context.Context, d *conveyor.Delivery, v struct{ N int }) error {
		d.SetResult(fmt.Appendf(nil, "%d", v.N*2))
		return nil
	})
	wtRun(t, w)

	cases := []struct {
		name    string
		req     *conveyorv1.EnqueueRequest
		state   conveyorv1.TaskState
		retried int32
		errHas  string
		result  func(id string) string
	}{
		{"success keeps the result", wtReq("out", "ok", "{}", opts()), conveyorv1.TaskState_TASK_STATE_COMPLETED, 0, "",
			func(id string) string { return "result:" + id }},
		{"error retries", wtReq("out", "fail", "{}", opts()), conveyorv1.TaskState_TASK_STATE_RETRY, 1, "flaky upstream", nil},
		{"skip retry archives", wtReq("out", "skip", "{}", opts()), conveyorv1.TaskState_TASK_STATE_ARCHIVED, 0, "bad input", nil},
		{"panic retries", wtReq("out", "panic", "{}", opts()), conveyorv1.TaskState_TASK_STATE_RETRY, 1, "panic: boom", nil},
		{"timeout retries", wtReq("out", "slow", "{}", &conveyorv1.TaskOptions{RetryPolicy: slow, Timeout: durationpb.New(150 * time.Millisecond)}),
			conveyorv1.TaskState_TASK_STATE_RETRY, 1, "deadline exceeded", nil},
		{"json decodes", wtReq("out", "json", `{"n":21}`, opts()), conveyorv1.TaskState_TASK_STATE_COMPLETED, 0, "",
			func(string) string { return "42" }},
		{"bad json archives", wtReq("out", "json", `{"n":`, opts()), conveyorv1.TaskState_TASK_STATE_ARCHIVED, 0, "decode the JSON payload", nil},
		{"non-json content type archives", &conveyorv1.EnqueueRequest{Queue: "out", Type: "json", Payload: []byte{1, 2},
			ContentType: "application/octet-stream", Options: opts()}, conveyorv1.TaskState_TASK_STATE_ARCHIVED, 0, `content type "application/octet-stream"`, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			id := e.enqueue(tc.req)
			info := e.waitState(id, tc.state, 20*time.Second)
			if info.GetRetried() != tc.retried {
				t.Errorf("retried = %d, want %d", info.GetRetried(), tc.retried)
			}
			if !strings.Contains(info.GetLastError(), tc.errHas) {
				t.Errorf("last_error = %q, want it to contain %q", info.GetLastError(), tc.errHas)
			}
			if tc.result != nil {
				if got, want := string(info.GetResult()), tc.result(id); got != want {
					t.Errorf("result = %q, want %q", got, want)
				}
			}
		})
	}
}

func TestWorkerRetriesExhausted(t *testing.T) {
	t.Parallel()
	e := wtSetup(t, server.Config{})
	var calls atomic.Int32
	w := e.newWorker(conveyor.WithQueue("ex", 1))
	w.HandleFunc("fail", func(_ context.Context, d *conveyor.Delivery) error {
		calls.Add(1)
		if d.MaxRetry != 1 {
			return conveyor.SkipRetry(fmt.Errorf("MaxRetry = %d, want 1", d.MaxRetry))
		}
		return fmt.Errorf("attempt %d failed", d.Retried+1)
	})
	wtRun(t, w)
	id := e.enqueue(wtReq("ex", "fail", "{}", &conveyorv1.TaskOptions{MaxRetry: 1,
		RetryPolicy: &conveyorv1.RetryPolicy{Strategy: conveyorv1.RetryStrategy_RETRY_STRATEGY_FIXED, Base: durationpb.New(10 * time.Millisecond)}}))
	info := e.waitState(id, conveyorv1.TaskState_TASK_STATE_ARCHIVED, 20*time.Second)
	if info.GetRetried() != 1 || info.GetLastError() != "attempt 2 failed" {
		t.Fatalf("archived with retried %d and last_error %q, want 1 and %q", info.GetRetried(), info.GetLastError(), "attempt 2 failed")
	}
	if c := calls.Load(); c != 2 {
		t.Fatalf("handler ran %d times, want 2", c)
	}
}

func TestWorkerOptionErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		addr string
		opts []conveyor.WorkerOption
		want string
	}{
		{"bad address", "127.0.0.1:7420", nil, "http:// or https://"},
		{"bad queue name", "http://127.0.0.1:1", []conveyor.WorkerOption{conveyor.WithQueue("-x", 1)}, "queue name"},
		{"zero weight", "http://127.0.0.1:1", []conveyor.WorkerOption{conveyor.WithQueues(map[string]int32{"a": 0})}, "weight"},
		{"zero concurrency", "http://127.0.0.1:1", []conveyor.WorkerOption{conveyor.WithConcurrency(0)}, "concurrency"},
		{"negative grace", "http://127.0.0.1:1", []conveyor.WorkerOption{conveyor.WithDrainGrace(-time.Second)}, "drain grace"},
		{"grpc-web", "http://127.0.0.1:1", []conveyor.WorkerOption{conveyor.WithProtocol(conveyor.ProtocolGRPCWeb)}, "gRPC-Web"},
		{"label not UTF-8", "http://127.0.0.1:1", []conveyor.WorkerOption{conveyor.WithLabels(map[string]string{"host": "a\xff"})}, "not valid UTF-8"},
		{"version not UTF-8", "http://127.0.0.1:1", []conveyor.WorkerOption{conveyor.WithMinServerVersion("v1\xff")}, "not valid UTF-8"},
		{"release not UTF-8", "http://127.0.0.1:1", []conveyor.WorkerOption{conveyor.WithReleaseID("r\xff")}, "release id"},
		{"release too long", "http://127.0.0.1:1", []conveyor.WorkerOption{conveyor.WithReleaseID(strings.Repeat("r", 1025))}, "release id is 1025 bytes; the limit is 1024"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := conveyor.NewWorker(tc.addr, tc.opts...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("NewWorker = %v, want an error containing %q", err, tc.want)
			}
		})
	}
	w, err := conveyor.NewWorker("http://127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "no handlers") {
		t.Fatalf("Run without handlers = %v", err)
	}
}

func TestWorkerConnectProtocol(t *testing.T) {
	t.Parallel()
	e := wtSetup(t, server.Config{})
	w := e.newWorker(conveyor.WithProtocol(conveyor.ProtocolConnect), conveyor.WithQueue("cp", 1))
	var mws []string
	var mu sync.Mutex
	w.Use(conveyor.LoggingMiddleware(slog.New(slog.NewTextHandler(io.Discard, nil))),
		conveyor.HooksMiddleware(conveyor.Hooks{
			OnStart: func(ctx context.Context, d *conveyor.Delivery) context.Context {
				mu.Lock()
				mws = append(mws, "start "+d.Type)
				mu.Unlock()
				return ctx
			},
			OnFinish: func(_ context.Context, d *conveyor.Delivery, err error, _ time.Duration) {
				mu.Lock()
				mws = append(mws, fmt.Sprintf("finish %s %v", d.Type, err))
				mu.Unlock()
			},
		}))
	w.HandleFunc("t", func(_ context.Context, d *conveyor.Delivery) error {
		d.SetResult(d.Payload)
		return nil
	})
	wtRun(t, w)
	id := e.enqueue(wtReq("cp", "t", `{"over":"connect"}`, nil))
	info := e.waitState(id, conveyorv1.TaskState_TASK_STATE_COMPLETED, 10*time.Second)
	if string(info.GetResult()) != `{"over":"connect"}` {
		t.Fatalf("result %q", info.GetResult())
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(mws, "; ") != "start t; finish t <nil>" {
		t.Fatalf("hooks saw %q", mws)
	}
}
