package main

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"github.com/jackc/pgx/v5"

	"github.com/conveyor-dev/conveyor/broker"
	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/gen/conveyor/v1/conveyorv1connect"
	"github.com/conveyor-dev/conveyor/internal/pgtest"
	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

// crashWait bounds every wait of the crash tests: generous, for a slow,
// busy machine; the tests normally finish far inside it.
const crashWait = 60 * time.Second

// TestPostgresSIGKILLUnderLoadLosesNothing kills a server on PostgreSQL
// with SIGKILL while producers enqueue (unary and batches) and a worker
// completes tasks, and restarts it on the same database and address. Every
// acknowledged enqueue is there; the tasks that were ACTIVE at the kill are
// sent again; the producers and the worker carry on against the restarted
// server, and the worker drains every task to COMPLETED, none stuck.
func TestPostgresSIGKILLUnderLoadLosesNothing(t *testing.T) {
	conveyorBinary(t) // skipped under -short, before anything is set up
	url := schemaURL(t)
	child := startPostgresChild(t, url, "127.0.0.1:0")
	load := startLoad(t, child.url, 8)
	worker := startCrashWorker(t, child.url)
	servertest.Eventually(t, crashWait, "500 acknowledged enqueues and 200 handled tasks", func() bool {
		return load.acks.Load() >= 500 && worker.handled.Load() >= 200
	})

	if err := child.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = child.cmd.Wait()
	ackedAtKill, handledAtKill := load.acks.Load(), worker.handled.Load()
	active := activeTasks(t, url)
	t.Logf("at the kill: %d enqueues acknowledged, %d tasks handled, %d tasks ACTIVE", ackedAtKill, handledAtKill, len(active))

	// The same address: the producers and the worker reconnect on their own.
	restarted := startPostgresChild(t, url, strings.TrimPrefix(child.url, "http://"))
	servertest.Eventually(t, crashWait, "the restarted server acknowledges enqueues and its worker handles tasks", func() bool {
		return load.acks.Load() >= ackedAtKill+200 && worker.handled.Load() >= handledAtKill+100
	})
	acked := load.stop()
	t.Logf("%d enqueues acknowledged in all; failed enqueues by code: %v", len(acked), load.failedCodes())
	checkAllCompleted(t, restarted.url, slices.Concat(acked, active))
	worker.checkRunning(t)
}

// TestPostgresRestartUnderLoad restarts PostgreSQL itself (an immediate
// stop, as a crash, then a start) under a server with producers and a
// worker at work. The server keeps running: during the outage enqueues
// fail with unavailable, never another code nor past their deadline, and
// the health check says NOT_SERVING; once the database is back it says
// SERVING, enqueues are acknowledged, the worker's tasks are dispatched
// again, and every acknowledged enqueue is drained to COMPLETED.
func TestPostgresRestartUnderLoad(t *testing.T) {
	conveyorBinary(t) // skipped under -short, before the cluster is made
	db := pgtest.NewCluster(t)
	// A lease whose commit's answer the outage cut off was never sent to
	// the session: the task is sent again once the lease lapses.
	child := startPostgresChild(t, db.URL, "127.0.0.1:0", "--lease-ttl", "5s")
	load := startLoad(t, child.url, 8)
	worker := startCrashWorker(t, child.url)
	hc := servertest.HTTPClient()
	defer hc.CloseIdleConnections()
	health := grpchealth.NewClient(hc, child.url, connect.WithGRPC())
	status := func() grpchealth.Status {
		res, err := health.Check(context.Background(), &grpchealth.CheckRequest{})
		if err != nil {
			return grpchealth.StatusUnknown
		}
		return res.Status
	}
	servertest.Eventually(t, crashWait, "300 acknowledged enqueues and 100 handled tasks", func() bool {
		return load.acks.Load() >= 300 && worker.handled.Load() >= 100
	})

	db.Stop("immediate")
	unavailable := load.unavailable.Load()
	servertest.Eventually(t, crashWait, "an enqueue failed with unavailable during the outage", func() bool {
		return load.unavailable.Load() > unavailable
	})
	servertest.Eventually(t, crashWait, "health NOT_SERVING during the outage", func() bool {
		return status() == grpchealth.StatusNotServing
	})

	db.Start()
	ackedAtStart, handledAtStart := load.acks.Load(), worker.handled.Load()
	servertest.Eventually(t, crashWait, "health SERVING once the database is back", func() bool {
		return status() == grpchealth.StatusServing
	})
	servertest.Eventually(t, crashWait, "enqueues acknowledged and tasks handled once the database is back", func() bool {
		return load.acks.Load() >= ackedAtStart+300 && worker.handled.Load() >= handledAtStart+100
	})
	acked := load.stop()
	codes := load.failedCodes()
	t.Logf("%d enqueues acknowledged in all; failed enqueues by code: %v", len(acked), codes)
	for code, n := range codes {
		if code != connect.CodeUnavailable {
			t.Errorf("%d enqueues failed with %v, want only unavailable: %s", n, code, load.firstFailure(code))
		}
	}
	// The server that answers here is the one started above: nothing
	// restarted it, so it ran through the outage.
	checkAllCompleted(t, child.url, acked)
	worker.checkRunning(t)
}

// startPostgresChild starts `conveyor server --broker postgres` on the
// database at url, listening on listen, with flags added, and logs its
// output if the test fails.
func startPostgresChild(t *testing.T, url, listen string, flags ...string) *childServer {
	t.Helper()
	child := runChild(t, append([]string{"server", "--listen", listen, "--data-dir", t.TempDir(),
		"--broker", "postgres", "--database-url", url}, flags...)...)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("server at %s, its log:\n%s", child.url, child.stderr.String())
		}
	})
	return child
}

// activeTasks returns the ids of the tasks ACTIVE in the database at url:
// a look at the engine's table while no server runs (Open releases them).
func activeTasks(t *testing.T, url string) []string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(ctx) }()
	rows, err := conn.Query(ctx, "SELECT id FROM conveyor_tasks WHERE state = $1", int16(broker.StateActive))
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// enqueueLoad is producers enqueueing into a server until stopped, every
// fourth with batches of ten. A failed enqueue is retried after a pause.
// It keeps the id of every task whose enqueue the server acknowledged and
// the code of every failure.
type enqueueLoad struct {
	tasks  conveyorv1connect.TaskServiceClient
	cancel context.CancelFunc
	wg     sync.WaitGroup

	acks        atomic.Int64 // acknowledged tasks
	unavailable atomic.Int64 // enqueues failed with unavailable

	mu       sync.Mutex
	acked    []string
	codes    map[connect.Code]int
	failures map[connect.Code]string // the first failure of each code
}

// enqueueDeadline bounds one enqueue: a call still unanswered then has
// hung, and fails with deadline_exceeded.
const enqueueDeadline = 30 * time.Second

func startLoad(t *testing.T, url string, producers int) *enqueueLoad {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	hc := servertest.HTTPClient()
	l := &enqueueLoad{
		tasks:  conveyorv1connect.NewTaskServiceClient(hc, url, connect.WithGRPC()),
		cancel: cancel, codes: map[connect.Code]int{}, failures: map[connect.Code]string{},
	}
	for g := range producers {
		l.wg.Go(func() { l.produce(ctx, g) })
	}
	t.Cleanup(func() {
		l.stop()
		hc.CloseIdleConnections()
	})
	return l
}

func (l *enqueueLoad) produce(ctx context.Context, g int) {
	for i := 0; ctx.Err() == nil; i++ {
		payload := fmt.Sprintf(`{"producer":%d,"seq":%d}`, g, i)
		var err error
		if g%4 == 0 {
			err = l.enqueueBatch(ctx, payload)
		} else {
			err = l.enqueue(ctx, payload)
		}
		if err == nil {
			continue
		}
		select { // a pause, so that producers do not spin through an outage
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (l *enqueueLoad) enqueue(ctx context.Context, payload string) error {
	call, cancel := context.WithTimeout(ctx, enqueueDeadline)
	defer cancel()
	res, err := l.tasks.Enqueue(call, connect.NewRequest(&conveyorv1.EnqueueRequest{Type: "t", Payload: []byte(payload)}))
	if err != nil {
		l.failed(ctx, connect.CodeOf(err), err.Error())
		return err
	}
	l.ack(res.Msg.GetTask().GetId())
	return nil
}

func (l *enqueueLoad) enqueueBatch(ctx context.Context, payload string) error {
	items := make([]*conveyorv1.EnqueueRequest, 10)
	for j := range items {
		items[j] = &conveyorv1.EnqueueRequest{Type: "t", Payload: fmt.Appendf(nil, "%s#%d", payload, j)}
	}
	call, cancel := context.WithTimeout(ctx, enqueueDeadline)
	defer cancel()
	res, err := l.tasks.EnqueueBatch(call, connect.NewRequest(&conveyorv1.EnqueueBatchRequest{Items: items}))
	if err != nil {
		l.failed(ctx, connect.CodeOf(err), err.Error())
		return err
	}
	var itemErr error
	for _, r := range res.Msg.GetResults() {
		if r.GetTask() != nil {
			l.ack(r.GetTask().GetId())
			continue
		}
		var code connect.Code
		if err := code.UnmarshalText([]byte(r.GetCode())); err != nil {
			code = connect.CodeUnknown
		}
		l.failed(ctx, code, "batch item: "+r.GetCode()+": "+r.GetError())
		itemErr = fmt.Errorf("batch item: %s", r.GetError())
	}
	return itemErr
}

func (l *enqueueLoad) ack(id string) {
	l.mu.Lock()
	l.acked = append(l.acked, id)
	l.mu.Unlock()
	l.acks.Add(1)
}

// failed records a failure, unless it is the load stopping.
func (l *enqueueLoad) failed(ctx context.Context, code connect.Code, msg string) {
	if ctx.Err() != nil {
		return
	}
	if code == connect.CodeUnavailable {
		l.unavailable.Add(1)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.codes[code]++
	if _, ok := l.failures[code]; !ok {
		l.failures[code] = msg
	}
}

// stop stops the producers and returns the acknowledged tasks' ids.
func (l *enqueueLoad) stop() []string {
	l.cancel()
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.acked)
}

func (l *enqueueLoad) failedCodes() map[connect.Code]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.codes)
}

func (l *enqueueLoad) firstFailure(code connect.Code) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.failures[code]
}

// crashWorker is a Go SDK worker that completes every task of type t.
type crashWorker struct {
	w       *conveyor.Worker
	handled atomic.Int64 // handler runs (a redelivered task counts again)
	done    chan error   // Run's return
}

// close stops the worker at once.
func (cw *crashWorker) close() { _ = cw.w.Close() }

// checkRunning checks that the worker is still running (a lost session is
// transient: it reconnects), then closes it, before the test's end kills
// the server under it.
func (cw *crashWorker) checkRunning(t *testing.T) {
	t.Helper()
	select {
	case err := <-cw.done:
		t.Errorf("the worker stopped on its own: %v", err)
	default:
	}
	cw.close()
}

// startCrashWorker starts a worker on the server at url; the test's end
// closes it. It reconnects quickly, so that a restart costs the test
// little time.
func startCrashWorker(t *testing.T, url string) *crashWorker {
	t.Helper()
	cw := &crashWorker{done: make(chan error, 1)}
	var err error
	cw.w, err = conveyor.NewWorker(url, conveyor.WithConcurrency(8),
		conveyor.WithReconnectBackoff(50*time.Millisecond, time.Second),
		conveyor.WithLogger(slog.New(slog.NewTextHandler(testLog{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))))
	if err != nil {
		t.Fatal(err)
	}
	cw.w.HandleFunc("t", func(context.Context, *conveyor.Delivery) error {
		cw.handled.Add(1)
		return nil
	})
	go func() { cw.done <- cw.w.Run(context.Background()) }()
	t.Cleanup(cw.close)
	return cw
}

// testLog writes to the test's log.
type testLog struct{ t *testing.T }

func (w testLog) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// checkAllCompleted waits until the default queue of the server at url has
// nothing left to run, then checks that every task in ids is there and
// COMPLETED, and that no task at all is in another state.
func checkAllCompleted(t *testing.T, url string, ids []string) {
	t.Helper()
	hc := servertest.HTTPClient()
	defer hc.CloseIdleConnections()
	admin := conveyorv1connect.NewAdminServiceClient(hc, url, connect.WithGRPC())
	var last *conveyorv1.QueueInfo
	eventuallyShowing(t, "the queue drained", func() bool {
		res, err := admin.ListQueues(context.Background(), connect.NewRequest(&conveyorv1.ListQueuesRequest{}))
		if err != nil {
			return false
		}
		for _, q := range res.Msg.GetQueues() {
			if q.GetName() == "default" {
				last = q
				return q.GetPending() == 0 && q.GetActive() == 0 && q.GetRetry() == 0 && q.GetScheduled() == 0
			}
		}
		return false
	}, func() string { return fmt.Sprint(last) })
	// The queue's counts are the node's own, and on PostgreSQL a node
	// reads them again after an outage (the other nodes' news it missed)
	// a moment after the database is back: they can say drained before
	// it has leased what another node enqueued then. The tasks' states
	// are the database's: wait until every one listed is COMPLETED.
	var states map[string]conveyorv1.TaskState
	eventuallyShowing(t, "every task COMPLETED", func() bool {
		states = listStates(t, admin)
		for _, st := range states {
			if st != conveyorv1.TaskState_TASK_STATE_COMPLETED {
				return false
			}
		}
		return true
	}, func() string { return fmt.Sprintf("%d tasks listed: %v", len(states), countStates(states)) })
	slices.Sort(ids)
	ids = slices.Compact(ids)
	lost, undone := 0, 0
	for _, id := range ids {
		switch st, ok := states[id]; {
		case !ok:
			if lost++; lost <= 10 {
				t.Errorf("acknowledged task %s lost", id)
			}
		case st != conveyorv1.TaskState_TASK_STATE_COMPLETED:
			if undone++; undone <= 10 {
				t.Errorf("task %s is %v, want COMPLETED", id, st)
			}
		}
	}
	for id, st := range states {
		if st != conveyorv1.TaskState_TASK_STATE_COMPLETED {
			if undone++; undone <= 10 {
				t.Errorf("task %s stuck in %v", id, st)
			}
		}
	}
	if lost+undone > 0 {
		t.Fatalf("of %d tasks checked (%d in the queue): %d lost, %d not COMPLETED", len(ids), len(states), lost, undone)
	}
	t.Logf("all %d tasks checked are COMPLETED (%d in the queue)", len(ids), len(states))
}

// eventuallyShowing is servertest.Eventually, logging what seen returns
// (the last state observed) when cond does not come to hold.
func eventuallyShowing(t *testing.T, msg string, cond func() bool, seen func() string) {
	t.Helper()
	ok := false
	defer func() {
		if !ok {
			t.Logf("last seen: %s", seen())
		}
	}()
	servertest.Eventually(t, crashWait, msg, cond)
	ok = true
}

// countStates counts states by state.
func countStates(states map[string]conveyorv1.TaskState) map[conveyorv1.TaskState]int {
	n := map[conveyorv1.TaskState]int{}
	for _, st := range states {
		n[st]++
	}
	return n
}

// listStates lists every task of the default queue: id to state.
func listStates(t *testing.T, admin conveyorv1connect.AdminServiceClient) map[string]conveyorv1.TaskState {
	t.Helper()
	states := map[string]conveyorv1.TaskState{}
	token := ""
	for {
		res, err := admin.ListTasks(context.Background(), connect.NewRequest(&conveyorv1.ListTasksRequest{
			Queue: "default", PageSize: 1000, PageToken: token}))
		if err != nil {
			t.Fatal(err)
		}
		for _, task := range res.Msg.GetTasks() {
			states[task.GetId()] = task.GetState()
		}
		if token = res.Msg.GetNextPageToken(); token == "" {
			return states
		}
	}
}
