package conveyor_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

// The tests in this file run the Worker against a real server: routing by
// the types its Hello declares, and at-most-once tasks run under start
// authorization.

// wtRunCounter counts each task's runs.
type wtRunCounter struct {
	mu   sync.Mutex
	runs map[string]int
}

func (c *wtRunCounter) ran(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.runs == nil {
		c.runs = map[string]int{}
	}
	c.runs[id]++
}

func (c *wtRunCounter) count(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.runs[id]
}

// TestWorkerAtMostOnceRunsOnce: at-most-once tasks are run, each exactly
// once, and complete.
func TestWorkerAtMostOnceRunsOnce(t *testing.T) {
	t.Parallel()
	e := wtSetup(t, server.Config{})
	var runs wtRunCounter
	w := e.newWorker(conveyor.WithConcurrency(4))
	w.HandleFunc("once", func(_ context.Context, d *conveyor.Delivery) error {
		if !d.Options.AtMostOnce {
			return conveyor.SkipRetry(fmt.Errorf("task %s is not at most once", d.ID))
		}
		runs.ran(d.ID)
		return nil
	})
	wtRun(t, w)
	var reqs []*conveyorv1.EnqueueRequest
	for i := range 20 {
		reqs = append(reqs, wtReq("default", "once", fmt.Sprintf(`{"n":%d}`, i), &conveyorv1.TaskOptions{AtMostOnce: true}))
	}
	for _, id := range e.enqueueAll(reqs) {
		e.waitState(id, conveyorv1.TaskState_TASK_STATE_COMPLETED, 20*time.Second)
		if n := runs.count(id); n != 1 {
			t.Errorf("task %s ran %d times, want 1", id, n)
		}
	}
}

// TestWorkerAtMostOnceOutcomeLost: an at-most-once task whose worker is cut
// off while it runs is archived as an outcome unknown, and no worker runs
// it again.
func TestWorkerAtMostOnceOutcomeLost(t *testing.T) {
	t.Parallel()
	e := wtSetup(t, server.Config{})
	var runs wtRunCounter
	started := make(chan string, 1)
	block := func(ctx context.Context, d *conveyor.Delivery) error {
		runs.ran(d.ID)
		started <- d.ID
		<-ctx.Done()
		return context.Cause(ctx)
	}
	w1 := e.newWorker()
	w1.HandleFunc("once", block)
	wtRun(t, w1)
	id := e.enqueue(wtReq("default", "once", "{}", &conveyorv1.TaskOptions{AtMostOnce: true}))
	wtRecv(t, started, 10*time.Second, "the task starts")
	if err := w1.Close(); err != nil { // the stream is cut: no Result
		t.Fatal(err)
	}
	info := e.waitState(id, conveyorv1.TaskState_TASK_STATE_ARCHIVED, 20*time.Second)
	if !strings.HasPrefix(info.GetLastError(), "outcome unknown:") {
		t.Errorf("last_error = %q, want it to begin %q", info.GetLastError(), "outcome unknown:")
	}

	// Another worker for the type runs an ordinary task, and never the
	// archived one.
	w2 := e.newWorker()
	w2.HandleFunc("once", func(_ context.Context, d *conveyor.Delivery) error {
		runs.ran(d.ID)
		return nil
	})
	wtRun(t, w2)
	other := e.enqueue(wtReq("default", "once", "{}", nil))
	e.waitState(other, conveyorv1.TaskState_TASK_STATE_COMPLETED, 20*time.Second)
	if n := runs.count(id); n != 1 {
		t.Fatalf("the at-most-once task ran %d times, want 1", n)
	}
	if s := e.get(id).GetState(); s != conveyorv1.TaskState_TASK_STATE_ARCHIVED {
		t.Fatalf("the at-most-once task is %s, want still ARCHIVED", s)
	}
}

// TestWorkerRoutedByType: a worker is given only the types it has handlers
// for. A task of another type, enqueued first, waits (PENDING, listed as
// unserved, never retried) while the worker runs the one after it, until a
// worker for its type comes.
func TestWorkerRoutedByType(t *testing.T) {
	t.Parallel()
	e := wtSetup(t, server.Config{})
	ranOn := make(chan string, 4)
	wa := e.newWorker(conveyor.WithConcurrency(1))
	wa.HandleFunc("route.a", func(_ context.Context, d *conveyor.Delivery) error {
		ranOn <- "a:" + d.Type
		return nil
	})
	b := e.enqueue(wtReq("default", "route.b", "{}", nil))
	a := e.enqueue(wtReq("default", "route.a", "{}", nil))
	wtRun(t, wa)
	e.waitState(a, conveyorv1.TaskState_TASK_STATE_COMPLETED, 20*time.Second)
	if info := e.get(b); info.GetState() != conveyorv1.TaskState_TASK_STATE_PENDING || info.GetRetried() != 0 {
		t.Fatalf("route.b is %s with %d retries, want PENDING, never tried", info.GetState(), info.GetRetried())
	}
	if u := e.queue("default").GetUnservedTypes(); !slices.Contains(u, "route.b") {
		t.Errorf("unserved types %v, want route.b among them", u)
	}

	wb := e.newWorker()
	wb.HandleFunc("route.b", func(_ context.Context, d *conveyor.Delivery) error {
		ranOn <- "b:" + d.Type
		return nil
	})
	wtRun(t, wb)
	if info := e.waitState(b, conveyorv1.TaskState_TASK_STATE_COMPLETED, 20*time.Second); info.GetRetried() != 0 {
		t.Errorf("route.b completed after %d retries, want 0", info.GetRetried())
	}
	var got []string
	for len(ranOn) > 0 {
		got = append(got, <-ranOn)
	}
	if want := []string{"a:route.a", "b:route.b"}; !slices.Equal(got, want) {
		t.Fatalf("runs %v, want %v (each worker its own type)", got, want)
	}
}

// TestWorkerRelease: the Worker's release id reaches the server; new work
// goes to the newest release, and once that one is drained, to the older.
func TestWorkerRelease(t *testing.T) {
	t.Parallel()
	e := wtSetup(t, server.Config{})
	ranOn := make(chan string, 4)
	newWorker := func(release string) {
		w := e.newWorker(conveyor.WithReleaseID(release))
		w.HandleFunc("t", func(context.Context, *conveyor.Delivery) error {
			ranOn <- release
			return nil
		})
		wtRun(t, w)
		servertest.Eventually(t, 10*time.Second, "a worker of release "+release, func() bool {
			res, err := e.admin.ListWorkers(context.Background(), connect.NewRequest(&conveyorv1.ListWorkersRequest{}))
			return err == nil && slices.ContainsFunc(res.Msg.GetWorkers(), func(w *conveyorv1.WorkerInfo) bool {
				return w.GetReleaseId() == release && w.GetStartAuthorization() && slices.Equal(w.GetTypes(), []string{"t"})
			})
		})
	}
	newWorker("v1")
	newWorker("v2") // first seen after v1: the newest
	run := func() string {
		t.Helper()
		id := e.enqueue(wtReq("default", "t", "{}", nil))
		e.waitState(id, conveyorv1.TaskState_TASK_STATE_COMPLETED, 20*time.Second)
		return wtRecv(t, ranOn, 10*time.Second, "the task's run")
	}
	if got := run(); got != "v2" {
		t.Fatalf("a task ran on %s, want v2 (the newest release)", got)
	}
	if _, err := e.admin.DrainRelease(context.Background(), connect.NewRequest(&conveyorv1.DrainReleaseRequest{ReleaseId: "v2"})); err != nil {
		t.Fatal(err)
	}
	if got := run(); got != "v1" {
		t.Fatalf("a task ran on %s after v2 was drained, want v1", got)
	}
}
