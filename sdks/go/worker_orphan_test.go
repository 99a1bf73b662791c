// Handlers that outlive their session: canceled when the session is lost,
// they ignore their context and keep running. The Worker counts them
// against its concurrency when it says Hello again (protocol §5.5: it must
// be able to run every task the new session may be sent).

package conveyor_test

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

// cutAll severs every live connection through the proxy.
func (p *wtProxy) cutAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for pair := range p.pairs {
		pair.close()
		delete(p.pairs, pair)
	}
}

// sessions lists the server's live worker sessions.
func (e *wtEnv) sessions() []*conveyorv1.WorkerInfo {
	e.t.Helper()
	res, err := e.admin.ListWorkers(context.Background(), connect.NewRequest(&conveyorv1.ListWorkersRequest{}))
	if err != nil {
		e.t.Fatalf("list workers: %v", err)
	}
	return res.Msg.GetWorkers()
}

// waitSession waits for a live session other than the one named not, and
// returns it.
func (e *wtEnv) waitSession(not string) *conveyorv1.WorkerInfo {
	e.t.Helper()
	var found *conveyorv1.WorkerInfo
	servertest.Eventually(e.t, 30*time.Second, "a new worker session", func() bool {
		for _, s := range e.sessions() {
			if s.GetSessionId() != not {
				found = s
				return true
			}
		}
		return false
	})
	return found
}

// wtStubborn is a handler whose first run ignores its context until the
// test releases it; later runs succeed at once.
type wtStubborn struct {
	runs     atomic.Int32
	started  chan struct{}
	release  chan struct{}
	released func()
}

func newWTStubborn() *wtStubborn {
	h := &wtStubborn{started: make(chan struct{}), release: make(chan struct{})}
	h.released = sync.OnceFunc(func() { close(h.release) })
	return h
}

func (h *wtStubborn) ProcessTask(context.Context, *conveyor.Delivery) error {
	if h.runs.Add(1) == 1 {
		close(h.started)
		<-h.release // ignores its context
	}
	return nil
}

// TestWorkerOrphanNarrowsTheNextHello: after a lost session, a handler
// still running from it keeps one of the worker's two slots, so the new
// session declares a concurrency of one, and its tasks all run.
func TestWorkerOrphanNarrowsTheNextHello(t *testing.T) {
	t.Parallel()
	e := wtSetup(t, server.Config{})
	proxy := wtStartProxy(t, e.srv.Addr().String())
	stubborn := newWTStubborn()
	w := wtNewWorker(t, proxy.URL(), conveyor.WithQueue("orphan", 1), conveyor.WithConcurrency(2))
	w.Handle("stubborn", stubborn)
	w.HandleFunc("quick", func(context.Context, *conveyor.Delivery) error { return nil })
	wtRun(t, w)
	t.Cleanup(stubborn.released) // before the worker's cleanup
	a := e.enqueue(wtReq("orphan", "stubborn", "{}", nil))
	wtRecv(t, stubborn.started, 10*time.Second, "A starts")
	first := e.waitSession("")

	proxy.cutAll()
	second := e.waitSession(first.GetSessionId())
	if got := second.GetConcurrency(); got != 1 {
		t.Fatalf("the session after the cut declares concurrency %d, want 1 (2 minus the handler still running)", got)
	}
	// A came back (the server released it when the stream closed) and,
	// with B, runs in the one slot left while A's first run goes on.
	b := e.enqueue(wtReq("orphan", "quick", "{}", nil))
	e.waitState(a, conveyorv1.TaskState_TASK_STATE_COMPLETED, 30*time.Second)
	e.waitState(b, conveyorv1.TaskState_TASK_STATE_COMPLETED, 30*time.Second)
}

// TestWorkerOrphanHoldingEverySlotDelaysHello: when the handlers of a lost
// session hold every slot, the worker says no Hello until one returns, so
// the server cannot dispatch a task to it that could not start: the task
// stays PENDING, free for other workers.
func TestWorkerOrphanHoldingEverySlotDelaysHello(t *testing.T) {
	t.Parallel()
	e := wtSetup(t, server.Config{})
	proxy := wtStartProxy(t, e.srv.Addr().String())
	stubborn := newWTStubborn()
	logs := wtLogWatch{msgs: make(chan string, 256)}
	w := wtNewWorker(t, proxy.URL(), conveyor.WithQueue("orphan", 1), conveyor.WithConcurrency(1),
		conveyor.WithLogger(slog.New(logs)))
	w.Handle("stubborn", stubborn)
	wtRun(t, w)
	t.Cleanup(stubborn.released)
	a := e.enqueue(wtReq("orphan", "stubborn", "{}", nil))
	wtRecv(t, stubborn.started, 10*time.Second, "A starts")
	first := e.waitSession("")

	proxy.cutAll()
	logs.await(t, "worker waiting for a free slot before it reconnects")
	// The server released A when the stream closed; nothing leases it again.
	e.waitState(a, conveyorv1.TaskState_TASK_STATE_PENDING, 30*time.Second)
	for _, s := range e.sessions() {
		if s.GetSessionId() != first.GetSessionId() {
			t.Fatalf("session %s opened while the orphan holds the only slot", s.GetSessionId())
		}
	}
	stubborn.released()
	second := e.waitSession(first.GetSessionId())
	if got := second.GetConcurrency(); got != 1 {
		t.Fatalf("the session after the orphan returned declares concurrency %d, want 1", got)
	}
	e.waitState(a, conveyorv1.TaskState_TASK_STATE_COMPLETED, 30*time.Second)
}

// TestWorkerUnwindingHandlerDoesNotNarrowTheNextHello: a handler that is
// still returning from its cancellation when the worker reconnects (the
// first reconnect may come at once) is waited for, so the new session
// declares the whole concurrency rather than running short of it for as
// long as it lasts.
func TestWorkerUnwindingHandlerDoesNotNarrowTheNextHello(t *testing.T) {
	t.Parallel()
	e := wtSetup(t, server.Config{})
	proxy := wtStartProxy(t, e.srv.Addr().String())
	started, release := make(chan struct{}), make(chan struct{})
	releaseOnce := sync.OnceFunc(func() { close(release) })
	t.Cleanup(releaseOnce)
	var runs atomic.Int32
	logs := wtLogWatch{msgs: make(chan string, 256)}
	w := wtNewWorker(t, proxy.URL(), conveyor.WithQueue("orphan", 1), conveyor.WithConcurrency(2),
		conveyor.WithLogger(slog.New(logs)))
	w.HandleFunc("unwinding", func(ctx context.Context, _ *conveyor.Delivery) error {
		if runs.Add(1) == 1 {
			close(started)
			<-ctx.Done() // honours its context, but takes a while to return
			<-release
		}
		return nil
	})
	wtRun(t, w)
	a := e.enqueue(wtReq("orphan", "unwinding", "{}", nil))
	wtRecv(t, started, 10*time.Second, "A starts")
	first := e.waitSession("")

	proxy.cutAll()
	logs.await(t, "waiting for the handlers of a lost session to return before reconnecting")
	releaseOnce()
	second := e.waitSession(first.GetSessionId())
	if got := second.GetConcurrency(); got != 2 {
		t.Fatalf("the session after the cut declares concurrency %d, want 2 (the handler returned within the grace)", got)
	}
	e.waitState(a, conveyorv1.TaskState_TASK_STATE_COMPLETED, 30*time.Second)
}
