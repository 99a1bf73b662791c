package conveyortest

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
)

// DefaultDrainTimeout bounds DrainOnce when its context has no deadline,
// so that a task no handler takes fails the test rather than hang it.
const DefaultDrainTimeout = 30 * time.Second

// drainPoll is how often DrainOnce looks at the tasks it waits for.
const drainPoll = 10 * time.Millisecond

// DrainOnce runs w against s until every task that was PENDING or ACTIVE
// when it was called has left those states (completed, or failed into
// RETRY or ARCHIVED, or canceled), then stops w gracefully and returns.
// Tasks enqueued after the call (say, by the handlers) are not waited
// for, nor are tasks that were SCHEDULED, BLOCKED, AGGREGATING or in RETRY
// then; a task that fails is not waited out through its retries. Assert
// on the outcome with RequireEnqueued and a State.
//
// w must be a Worker of s (see Server.NewWorker) with its handlers
// registered, and not yet Run: DrainOnce runs it, and a Worker runs once.
// It fails t if w stops on its own (a refused session, no handler), or if
// ctx ends first (after DefaultDrainTimeout when ctx has no deadline),
// naming the tasks still waiting: most often tasks of a queue w does not
// serve or of a type it has no handler for. Handlers get a context with
// ctx's values.
func DrainOnce(ctx context.Context, t testing.TB, s *Server, w *conveyor.Worker) {
	t.Helper()
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultDrainTimeout)
		defer cancel()
	}
	waiting, err := s.snapshot(ctx)
	if err != nil {
		t.Fatalf("conveyortest: DrainOnce: %v", err)
	}
	run := startWorker(ctx, w)
	defer run.stop(t)
	tick := time.NewTicker(drainPoll)
	defer tick.Stop()
	for len(waiting) > 0 {
		select {
		case err := <-run.done:
			run.stopped = true
			t.Fatalf("conveyortest: DrainOnce: the worker stopped before the tasks left PENDING and ACTIVE: %v", err)
		case <-ctx.Done():
			t.Fatalf("conveyortest: DrainOnce: %v with %d tasks still PENDING or ACTIVE (does the worker serve "+
				"their queue and have a handler for their type?):%s", context.Cause(ctx), len(waiting), listWaiting(waiting))
		case <-tick.C:
		}
		if waiting, err = s.waitingTasks(ctx, waiting); err != nil && !deadlineReached(ctx, err) {
			t.Fatalf("conveyortest: DrainOnce: %v", err)
		}
	}
}

// deadlineReached reports whether err is ctx's end at work, which the
// loop above reports with the tasks still waiting. The server, told the
// deadline, may end a listing by it a moment before ctx's own timer
// fires, while ctx.Err() is still nil.
func deadlineReached(ctx context.Context, err error) bool {
	return ctx.Err() != nil || connect.CodeOf(err) == connect.CodeDeadlineExceeded
}

// snapshot lists the tasks DrainOnce waits for. It is not cut short by
// ctx's deadline, which bounds the wait for them: on a loaded machine a
// short deadline could otherwise end before the list, and the failure
// could not name the tasks. DefaultDrainTimeout still bounds it.
func (s *Server) snapshot(ctx context.Context) (map[string]*conveyorv1.TaskInfo, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), DefaultDrainTimeout)
	defer cancel()
	return s.waitingTasks(ctx, nil)
}

// waitingTasks returns the PENDING and ACTIVE tasks by id: all of them
// for a nil among, else those of among (whose queues alone are listed).
func (s *Server) waitingTasks(ctx context.Context, among map[string]*conveyorv1.TaskInfo) (map[string]*conveyorv1.TaskInfo, error) {
	queues := []string{""}
	if among != nil {
		queues = slices.Compact(slices.Sorted(func(yield func(string) bool) {
			for _, task := range among {
				if !yield(task.GetQueue()) {
					return
				}
			}
		}))
	}
	out := map[string]*conveyorv1.TaskInfo{}
	for _, q := range queues {
		for _, state := range []conveyorv1.TaskState{conveyorv1.TaskState_TASK_STATE_PENDING, conveyorv1.TaskState_TASK_STATE_ACTIVE} {
			tasks, err := s.listTasks(ctx, q, state)
			if err != nil {
				return among, err
			}
			for _, task := range tasks {
				if _, ok := among[task.GetId()]; ok || among == nil {
					out[task.GetId()] = task
				}
			}
		}
	}
	return out, nil
}

// listWaiting lists the waiting tasks, one a line, in id order.
func listWaiting(waiting map[string]*conveyorv1.TaskInfo) string {
	var b strings.Builder
	for i, id := range slices.Sorted(maps.Keys(waiting)) {
		if i == maxListed {
			fmt.Fprintf(&b, "\n  … and %d more", len(waiting)-maxListed)
			break
		}
		task := waiting[id]
		fmt.Fprintf(&b, "\n  %s queue=%s type=%s state=%s", id, task.GetQueue(), task.GetType(), conveyor.TaskState(task.GetState()))
	}
	return b.String()
}

// running is a Worker whose Run is in progress.
type running struct {
	w       *conveyor.Worker
	done    chan error
	stopped bool // Run's error was taken from done
}

// startWorker runs w with ctx's values, but not its cancellation: DrainOnce
// stops it itself, gracefully, however it ends.
func startWorker(ctx context.Context, w *conveyor.Worker) *running {
	r := &running{w: w, done: make(chan error, 1)}
	go func() { r.done <- w.Run(context.WithoutCancel(ctx)) }()
	return r
}

// stop stops the worker gracefully and waits for Run to return, failing t
// if it returns an error.
func (r *running) stop(t testing.TB) {
	t.Helper()
	if r.stopped {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
	defer cancel()
	if err := r.w.Shutdown(ctx); err != nil {
		t.Errorf("conveyortest: DrainOnce: stop the worker: %v", err)
	}
	if err := <-r.done; err != nil {
		t.Errorf("conveyortest: DrainOnce: the worker: %v", err)
	}
}
