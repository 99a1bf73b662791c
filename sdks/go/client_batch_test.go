package conveyor_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path"
	"slices"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/oklog/ulid/v2"
	"google.golang.org/protobuf/proto"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/gen/conveyor/v1/conveyorv1connect"
	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

// rpcGate is an HTTP transport that counts the RPCs it carries by method
// name and can hold the next call of a method until the test releases it,
// so that tests can make Enqueue calls gather behind an RPC in flight.
type rpcGate struct {
	next http.RoundTripper

	mu       sync.Mutex
	counts   map[string]int
	holds    map[string]*rpcHold
	canceled map[string]int // held calls whose context ended while held
}

type rpcHold struct {
	arrived, release chan struct{}
}

func newRPCGate() *rpcGate {
	return &rpcGate{next: servertest.HTTPClient().Transport, counts: map[string]int{},
		holds: map[string]*rpcHold{}, canceled: map[string]int{}}
}

func (g *rpcGate) RoundTrip(req *http.Request) (*http.Response, error) {
	method := path.Base(req.URL.Path)
	g.mu.Lock()
	g.counts[method]++
	h := g.holds[method]
	delete(g.holds, method)
	g.mu.Unlock()
	if h != nil {
		close(h.arrived)
		select {
		case <-h.release:
		case <-req.Context().Done():
			g.mu.Lock()
			g.canceled[method]++
			g.mu.Unlock()
			return nil, req.Context().Err()
		}
	}
	return g.next.RoundTrip(req)
}

// holdNext holds the next call of method; release lets it go.
func (g *rpcGate) holdNext(method string) (arrived <-chan struct{}, release func()) {
	h := &rpcHold{arrived: make(chan struct{}), release: make(chan struct{})}
	g.mu.Lock()
	g.holds[method] = h
	g.mu.Unlock()
	var once sync.Once
	return h.arrived, func() { once.Do(func() { close(h.release) }) }
}

func (g *rpcGate) count(method string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.counts[method]
}

func (g *rpcGate) canceledCount(method string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.canceled[method]
}

// batchEnv is a real server and a Client whose RPCs pass through a gate.
type batchEnv struct {
	t    *testing.T
	srv  *servertest.Server
	gate *rpcGate
	c    *conveyor.Client
}

func batchSetup(t *testing.T, opts ...conveyor.Option) *batchEnv {
	t.Helper()
	e := &batchEnv{t: t, srv: servertest.Start(t, server.Config{}), gate: newRPCGate()}
	e.c = newClient(t, e.srv.URL(), append([]conveyor.Option{conveyor.WithHTTPClient(&http.Client{Transport: e.gate})}, opts...)...)
	return e
}

type enqueued struct {
	info *conveyor.TaskInfo
	err  error
}

// go_ runs c.Enqueue in a goroutine and returns where its outcome arrives.
func (e *batchEnv) go_(ctx context.Context, typ string, payload []byte, opts ...conveyor.TaskOption) <-chan enqueued {
	ch := make(chan enqueued, 1)
	go func() {
		info, err := e.c.Enqueue(ctx, typ, payload, opts...)
		ch <- enqueued{info, err}
	}()
	return ch
}

// holdFirst sends one Enqueue and holds it in flight; release lets it go
// and returns its outcome.
func (e *batchEnv) holdFirst() (release func() enqueued) {
	e.t.Helper()
	arrived, rel := e.gate.holdNext("Enqueue")
	first := e.go_(context.Background(), "first", nil)
	wtRecv(e.t, arrived, 10*time.Second, "the first Enqueue in flight")
	e.t.Cleanup(rel)
	return func() enqueued {
		rel()
		return wtRecv(e.t, first, 10*time.Second, "the first Enqueue's outcome")
	}
}

// waitGathered waits until n calls wait in the gathering batch.
func (e *batchEnv) waitGathered(n int) {
	e.t.Helper()
	servertest.Eventually(e.t, 10*time.Second, fmt.Sprintf("%d calls gathered", n), func() bool {
		return conveyor.GatheredForTest(e.c) == n
	})
}

// TestEnqueueBatchingShares: calls made while an RPC is in flight share
// one EnqueueBatch, and each gets its own task back, the same as GetTask
// (and so a unary Enqueue) gives.
func TestEnqueueBatchingShares(t *testing.T) {
	t.Parallel()
	e := batchSetup(t, conveyor.WithEnqueueInFlight(1))
	release := e.holdFirst()
	const n = 199
	outs := make([]<-chan enqueued, n)
	for i := range outs {
		outs[i] = e.go_(context.Background(), fmt.Sprintf("t%d", i), fmt.Appendf(nil, `{"i":%d}`, i),
			conveyor.Queue("share"), conveyor.MetadataKV("i", fmt.Sprint(i)), conveyor.Priority(1+i%9))
	}
	e.waitGathered(n)
	if r := release(); r.err != nil {
		t.Fatalf("the first Enqueue: %v", r.err)
	}
	ids := map[string]bool{}
	for i, ch := range outs {
		r := wtRecv(t, ch, 10*time.Second, "a gathered call's outcome")
		if r.err != nil {
			t.Fatalf("call %d: %v", i, r.err)
		}
		ids[r.info.ID] = true
		if r.info.Type != fmt.Sprintf("t%d", i) || string(r.info.Payload) != fmt.Sprintf(`{"i":%d}`, i) ||
			r.info.Metadata["i"] != fmt.Sprint(i) || r.info.Options.Priority != 1+i%9 {
			t.Fatalf("call %d got %s %s %v priority %d: not its own task", i, r.info.Type, r.info.Payload, r.info.Metadata, r.info.Options.Priority)
		}
		if i%40 == 0 {
			if stored := getTask(t, e.c, r.info.ID); !proto.Equal(stored.Proto(), r.info.Proto()) {
				t.Errorf("call %d: GetTask differs from the batched answer:\n got %v\nwant %v", i, stored.Proto(), r.info.Proto())
			}
		}
	}
	if len(ids) != n {
		t.Errorf("%d distinct ids for %d calls", len(ids), n)
	}
	if got, want := [2]int{e.gate.count("Enqueue"), e.gate.count("EnqueueBatch")}, [2]int{1, 1}; got != want {
		t.Errorf("%d Enqueue and %d EnqueueBatch RPCs for %d calls, want %v", got[0], got[1], n+1, want)
	}
}

// TestEnqueueBatchingFullBatchLeaves: a batch that reaches 1000 calls, or
// would pass 4 MiB with the next one, leaves at once, even while the RPC
// it waited for is still out.
func TestEnqueueBatchingFullBatchLeaves(t *testing.T) {
	t.Parallel()
	t.Run("items", func(t *testing.T) {
		t.Parallel()
		e := batchSetup(t, conveyor.WithEnqueueInFlight(1))
		release := e.holdFirst()
		const n = server.MaxBatchItems + 100
		outs := make([]<-chan enqueued, n)
		for i := range outs {
			outs[i] = e.go_(context.Background(), "t", nil)
		}
		servertest.Eventually(t, 20*time.Second, "the full batch leaves and 100 calls gather", func() bool {
			return e.gate.count("EnqueueBatch") == 1 && conveyor.GatheredForTest(e.c) == 100
		})
		release()
		for _, ch := range outs {
			if r := wtRecv(t, ch, 20*time.Second, "an outcome"); r.err != nil {
				t.Fatal(r.err)
			}
		}
		eq(t, "EnqueueBatch RPCs", e.gate.count("EnqueueBatch"), 2)
	})
	t.Run("bytes", func(t *testing.T) {
		t.Parallel()
		e := batchSetup(t, conveyor.WithEnqueueInFlight(1))
		release := e.holdFirst()
		payload := make([]byte, server.MaxPayloadBytes) // three fit in 4 MiB, four do not
		outs := make([]<-chan enqueued, 7)
		for i := range outs {
			outs[i] = e.go_(context.Background(), "t", payload, conveyor.ContentType("application/octet-stream"))
		}
		servertest.Eventually(t, 20*time.Second, "two batches of three leave and one call gathers", func() bool {
			return e.gate.count("EnqueueBatch") == 2 && conveyor.GatheredForTest(e.c) == 1
		})
		release()
		for _, ch := range outs {
			if r := wtRecv(t, ch, 20*time.Second, "an outcome"); r.err != nil || len(r.info.Payload) != len(payload) {
				t.Fatalf("outcome %v with %d payload bytes", r.err, len(r.info.Payload))
			}
		}
		// The last call left alone, as a plain Enqueue.
		eq(t, "Enqueue RPCs", e.gate.count("Enqueue"), 2)
		eq(t, "EnqueueBatch RPCs", e.gate.count("EnqueueBatch"), 2)
	})
}

// TestEnqueueBatchingErrors: in a shared batch, each call gets its own
// error, with the code and message a unary call would get: the loser of a
// duplicate task id or unique key gets ErrAlreadyExists, an invalid task
// ErrInvalidArgument, and the others their tasks.
func TestEnqueueBatchingErrors(t *testing.T) {
	t.Parallel()
	e := batchSetup(t, conveyor.WithEnqueueInFlight(1))
	release := e.holdFirst()
	id := ulid.Make().String()
	calls := map[string]<-chan enqueued{
		"id-1":    e.go_(context.Background(), "t", nil, conveyor.TaskID(id)),
		"id-2":    e.go_(context.Background(), "t", nil, conveyor.TaskID(id)),
		"uk-1":    e.go_(context.Background(), "t", nil, conveyor.Unique("uk", 0)),
		"uk-2":    e.go_(context.Background(), "t", nil, conveyor.Unique("uk", 0)),
		"invalid": e.go_(context.Background(), "t", nil, conveyor.Priority(42)),
		"ok-1":    e.go_(context.Background(), "t", nil),
		"ok-2":    e.go_(context.Background(), "t", []byte(`"x"`)),
	}
	e.waitGathered(len(calls))
	release()
	got := map[string]enqueued{}
	for name, ch := range calls {
		got[name] = wtRecv(t, ch, 10*time.Second, name+"'s outcome")
	}
	eq(t, "EnqueueBatch RPCs", e.gate.count("EnqueueBatch"), 1)

	unary := newClient(t, e.srv.URL(), conveyor.WithEnqueueBatching(false))
	for _, pair := range [][2]string{{"id-1", "id-2"}, {"uk-1", "uk-2"}} {
		a, b := got[pair[0]], got[pair[1]]
		if (a.err == nil) == (b.err == nil) {
			t.Fatalf("%s: %v and %v, want exactly one error", pair, a.err, b.err)
		}
		winner, loser := a, b
		if a.err != nil {
			winner, loser = b, a
		}
		if winner.info == nil || !errors.Is(loser.err, conveyor.ErrAlreadyExists) || errors.Is(loser.err, conveyor.ErrInvalidArgument) {
			t.Errorf("%s: winner %+v, loser %v; want a task and ErrAlreadyExists alone", pair, winner.info, loser.err)
		}
		// The same enqueue on its own RPC fails the same way.
		opt := conveyor.TaskID(id)
		if pair[0] == "uk-1" {
			opt = conveyor.Unique("uk", 0)
		}
		_, err := unary.Enqueue(context.Background(), "t", nil, opt)
		if err == nil || err.Error() != loser.err.Error() || connect.CodeOf(err) != connect.CodeOf(loser.err) {
			t.Errorf("%s: unary error %v, batched %v: want the same", pair, err, loser.err)
		}
	}
	inv := got["invalid"]
	if !errors.Is(inv.err, conveyor.ErrInvalidArgument) || errors.Is(inv.err, conveyor.ErrAlreadyExists) {
		t.Errorf("invalid: %v, want ErrInvalidArgument alone", inv.err)
	}
	if _, err := unary.Enqueue(context.Background(), "t", nil, conveyor.Priority(42)); err == nil || err.Error() != inv.err.Error() {
		t.Errorf("invalid: unary error %v, batched %v: want the same", err, inv.err)
	}
	for _, name := range []string{"ok-1", "ok-2"} {
		if r := got[name]; r.err != nil || r.info == nil || r.info.State != conveyor.TaskStatePending {
			t.Errorf("%s: %+v, %v, want a pending task", name, r.info, r.err)
		}
	}
}

// TestEnqueueBatchingContext: a call whose context ends while it gathers
// leaves the batch and its task is never sent; one whose context ends after
// its batch left returns the context's error while the batch goes on, and
// a batch that every caller gave up on is canceled.
func TestEnqueueBatchingContext(t *testing.T) {
	t.Parallel()
	isCtxErr := func(name string, err error) {
		t.Helper()
		var ce *conveyor.Error
		if !errors.Is(err, context.Canceled) || connect.CodeOf(err) != connect.CodeCanceled || !errors.As(err, &ce) {
			t.Errorf("%s: %v, want a canceled *conveyor.Error wrapping context.Canceled", name, err)
		}
	}
	e := batchSetup(t, conveyor.WithEnqueueInFlight(1))

	// Before the batch leaves.
	release := e.holdFirst()
	gone := ulid.Make().String()
	ctx, cancel := context.WithCancel(context.Background())
	x := e.go_(ctx, "t", nil, conveyor.TaskID(gone))
	e.waitGathered(1)
	cancel()
	isCtxErr("canceled while gathering", wtRecv(t, x, 10*time.Second, "the canceled call").err)
	eq(t, "gathered after the cancel", conveyor.GatheredForTest(e.c), 0)
	y := e.go_(context.Background(), "t", nil)
	e.waitGathered(1)
	release()
	if r := wtRecv(t, y, 10*time.Second, "the other call"); r.err != nil {
		t.Fatal(r.err)
	}
	if _, err := e.c.GetTask(context.Background(), gone); !errors.Is(err, conveyor.ErrNotFound) {
		t.Errorf("the canceled call's task: %v, want ErrNotFound (never sent)", err)
	}
	eq(t, "EnqueueBatch RPCs", e.gate.count("EnqueueBatch"), 0)

	// After the batch left: the caller gives up, the others get their tasks.
	release = e.holdFirst()
	batchArrived, releaseBatch := e.gate.holdNext("EnqueueBatch")
	t.Cleanup(releaseBatch)
	doubt := ulid.Make().String()
	ctx, cancel = context.WithCancel(context.Background())
	p := e.go_(ctx, "t", nil, conveyor.TaskID(doubt))
	q := e.go_(context.Background(), "t", nil)
	e.waitGathered(2)
	release()
	wtRecv(t, batchArrived, 10*time.Second, "the batch in flight")
	cancel()
	isCtxErr("canceled in flight", wtRecv(t, p, 10*time.Second, "the canceled call").err)
	releaseBatch()
	if r := wtRecv(t, q, 10*time.Second, "the call that waited"); r.err != nil {
		t.Fatal(r.err)
	}
	// In doubt, as after a unary call cut short: here the batch went on.
	if _, err := e.c.GetTask(context.Background(), doubt); err != nil {
		t.Errorf("the task of the call given up in flight: %v, want it stored", err)
	}

	// Every caller gives up: the batch's RPC is canceled.
	release = e.holdFirst()
	batchArrived, releaseBatch = e.gate.holdNext("EnqueueBatch")
	t.Cleanup(releaseBatch)
	ctx1, cancel1 := context.WithCancel(context.Background())
	ctx2, cancel2 := context.WithCancel(context.Background())
	p, q = e.go_(ctx1, "t", nil), e.go_(ctx2, "t", nil)
	e.waitGathered(2)
	release()
	wtRecv(t, batchArrived, 10*time.Second, "the batch in flight")
	cancel1()
	cancel2()
	isCtxErr("first to give up", wtRecv(t, p, 10*time.Second, "a canceled call").err)
	isCtxErr("second to give up", wtRecv(t, q, 10*time.Second, "a canceled call").err)
	servertest.Eventually(t, 10*time.Second, "the abandoned batch's RPC is canceled", func() bool {
		return e.gate.canceledCount("EnqueueBatch") == 1
	})
}

// TestEnqueueBatchingOff: with batching off, every call is its own RPC,
// even while others are in flight.
func TestEnqueueBatchingOff(t *testing.T) {
	t.Parallel()
	e := batchSetup(t, conveyor.WithEnqueueBatching(false))
	release := e.holdFirst()
	const n = 49
	outs := make([]<-chan enqueued, n)
	for i := range outs {
		outs[i] = e.go_(context.Background(), "t", nil)
	}
	for _, ch := range outs {
		if r := wtRecv(t, ch, 10*time.Second, "an outcome"); r.err != nil {
			t.Fatal(r.err)
		}
	}
	if r := release(); r.err != nil {
		t.Fatal(r.err)
	}
	eq(t, "Enqueue RPCs", e.gate.count("Enqueue"), n+1)
	eq(t, "EnqueueBatch RPCs", e.gate.count("EnqueueBatch"), 0)
	eq(t, "gathered", conveyor.GatheredForTest(e.c), 0)
}

func TestEnqueueInFlightOption(t *testing.T) {
	t.Parallel()
	if _, err := conveyor.NewClient("http://127.0.0.1:7420", conveyor.WithEnqueueInFlight(0)); err == nil {
		t.Error("NewClient with WithEnqueueInFlight(0) succeeded")
	}
}

// TestEnqueueBatchingMatchesUnary: a call answered by a shared batch (whose
// answer is brief) returns the TaskInfo a unary call returns, with every
// option, in every wire format; so does EnqueueBatch.
func TestEnqueueBatchingMatchesUnary(t *testing.T) {
	t.Parallel()
	for _, p := range []conveyor.Protocol{conveyor.ProtocolGRPC, conveyor.ProtocolGRPCWeb, conveyor.ProtocolConnect} {
		t.Run(p.String(), func(t *testing.T) {
			t.Parallel()
			e := batchSetup(t, conveyor.WithProtocol(p), conveyor.WithEnqueueInFlight(1))
			dep, err := e.c.Enqueue(context.Background(), "dep", nil)
			if err != nil {
				t.Fatal(err)
			}
			variants := [][]conveyor.TaskOption{
				nil,
				{conveyor.MaxRetry(0)}, // options present but empty
				{conveyor.Queue("q"), conveyor.Metadata(map[string]string{"a": "1"}), conveyor.ContentType("text/plain"),
					conveyor.MaxRetry(3), conveyor.Timeout(time.Minute), conveyor.Deadline(time.Now().Add(time.Hour)),
					conveyor.Unique("uk-"+p.String(), time.Hour), conveyor.Priority(7), conveyor.Retention(0),
					conveyor.ExpiresIn(time.Hour), conveyor.ConcurrencyKey("ck"),
					conveyor.RetryPolicy(conveyor.RetryStrategyFixed, time.Second, 0)},
				{conveyor.ProcessIn(time.Hour), conveyor.DependsOn(dep.ID, conveyor.OnFailureContinue), conveyor.DependsOn(dep.ID)},
				{conveyor.Group("g"), conveyor.TaskID(ulid.Make().String())},
			}
			release := e.holdFirst()
			outs := make([]<-chan enqueued, len(variants))
			for i, opts := range variants {
				outs[i] = e.go_(context.Background(), "t", fmt.Appendf(nil, `{"v":%d}`, i), opts...)
			}
			e.waitGathered(len(variants))
			release()
			tasks := make([]*conveyor.Task, len(variants))
			for i, ch := range outs {
				r := wtRecv(t, ch, 10*time.Second, "an outcome")
				if r.err != nil {
					t.Fatalf("variant %d: %v", i, r.err)
				}
				if stored := getTask(t, e.c, r.info.ID); !proto.Equal(stored.Proto(), r.info.Proto()) {
					t.Errorf("variant %d: the batched answer differs from GetTask:\n got %v\nwant %v", i, r.info.Proto(), stored.Proto())
				}
				tasks[i] = conveyor.NewTask("t", fmt.Appendf(nil, `{"b":%d}`, i), append(slices.Clip(variants[i]), conveyor.Unique(fmt.Sprint("b", i, p), 0))...)
			}
			eq(t, "EnqueueBatch RPCs", e.gate.count("EnqueueBatch"), 1)

			tasks[4] = conveyor.NewTask("t", nil, conveyor.Group("g"))
			res, err := e.c.EnqueueBatch(context.Background(), tasks)
			if err != nil {
				t.Fatal(err)
			}
			for i, r := range res {
				if r.Err != nil {
					t.Fatalf("EnqueueBatch item %d: %v", i, r.Err)
				}
				if stored := getTask(t, e.c, r.Task.ID); !proto.Equal(stored.Proto(), r.Task.Proto()) {
					t.Errorf("EnqueueBatch item %d differs from GetTask:\n got %v\nwant %v", i, r.Task.Proto(), stored.Proto())
				}
			}
		})
	}
}

// uncodedTaskService answers EnqueueBatch as a server older than per-item
// codes does: an item's error with no code. Its first Enqueue waits for
// release, so that calls gather behind it.
type uncodedTaskService struct {
	conveyorv1connect.UnimplementedTaskServiceHandler
	first   chan struct{} // closed when the first Enqueue arrives
	release chan struct{}
	mu      sync.Mutex
	unary   int
	batches int
}

func (s *uncodedTaskService) Enqueue(ctx context.Context, req *connect.Request[conveyorv1.EnqueueRequest]) (*connect.Response[conveyorv1.EnqueueResponse], error) {
	s.mu.Lock()
	s.unary++
	n := s.unary
	s.mu.Unlock()
	if n == 1 {
		close(s.first)
		select {
		case <-s.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if req.Msg.GetTaskId() == "dup" {
		return nil, connect.NewError(connect.CodeAlreadyExists, errors.New("task dup already exists"))
	}
	return connect.NewResponse(&conveyorv1.EnqueueResponse{Task: &conveyorv1.TaskInfo{Id: ulid.Make().String(), Type: req.Msg.GetType()}}), nil
}

func (s *uncodedTaskService) EnqueueBatch(_ context.Context, req *connect.Request[conveyorv1.EnqueueBatchRequest]) (*connect.Response[conveyorv1.EnqueueBatchResponse], error) {
	s.mu.Lock()
	s.batches++
	s.mu.Unlock()
	res := &conveyorv1.EnqueueBatchResponse{}
	for _, it := range req.Msg.GetItems() {
		r := &conveyorv1.EnqueueBatchResult{Task: &conveyorv1.TaskInfo{Id: ulid.Make().String(), Type: it.GetType()}}
		if it.GetTaskId() == "dup" {
			r = &conveyorv1.EnqueueBatchResult{Error: "task dup already exists"}
		}
		res.Results = append(res.Results, r)
	}
	return connect.NewResponse(res), nil
}

// TestEnqueueBatchingUncodedServer: against a server that gives no code
// for a failed item, the call is sent again on its own, so that its error
// has the code a unary call gets.
func TestEnqueueBatchingUncodedServer(t *testing.T) {
	t.Parallel()
	stub := &uncodedTaskService{first: make(chan struct{}), release: make(chan struct{})}
	c := newClient(t, serveStub(t)(conveyorv1connect.NewTaskServiceHandler(stub)), conveyor.WithEnqueueInFlight(1))
	e := &batchEnv{t: t, c: c}
	first := e.go_(context.Background(), "first", nil)
	wtRecv(t, stub.first, 10*time.Second, "the first Enqueue")
	dup := e.go_(context.Background(), "t", nil, conveyor.TaskID("dup"))
	ok := e.go_(context.Background(), "t", nil)
	e.waitGathered(2)
	close(stub.release)
	for _, ch := range []<-chan enqueued{first, ok} {
		if r := wtRecv(t, ch, 10*time.Second, "an outcome"); r.err != nil {
			t.Fatal(r.err)
		}
	}
	r := wtRecv(t, dup, 10*time.Second, "the duplicate's outcome")
	if !errors.Is(r.err, conveyor.ErrAlreadyExists) || r.err.Error() != "already_exists: task dup already exists" {
		t.Fatalf("duplicate: %v, want ErrAlreadyExists with the server's message", r.err)
	}
	stub.mu.Lock()
	defer stub.mu.Unlock()
	if stub.batches != 1 || stub.unary != 2 {
		t.Errorf("%d EnqueueBatch and %d Enqueue RPCs, want 1 and 2 (the first, and the duplicate again)", stub.batches, stub.unary)
	}
}

// shareCohort makes n calls gather behind a held Enqueue, releases it, and
// returns the n outcomes' channels once their shared EnqueueBatch left.
func (e *batchEnv) shareCohort(n int) []<-chan enqueued {
	e.t.Helper()
	release := e.holdFirst()
	outs := make([]<-chan enqueued, n)
	for i := range outs {
		outs[i] = e.go_(context.Background(), "cohort", nil)
	}
	e.waitGathered(n)
	if r := release(); r.err != nil {
		e.t.Fatalf("the first Enqueue: %v", r.err)
	}
	return outs
}

// TestEnqueueBatchingLingersForTheCohort: when a shared batch returns, the
// calls its callers make next gather into one batch, instead of the first
// of them leaving alone and the rest alternating behind it.
func TestEnqueueBatchingLingersForTheCohort(t *testing.T) {
	t.Parallel()
	e := batchSetup(t, conveyor.WithEnqueueInFlight(1))
	conveyor.SetEnqueueLingerForTest(e.c, time.Minute) // only the cohort ends it
	const n = 40
	outs := e.shareCohort(n)
	again := make([]<-chan enqueued, n)
	for i, ch := range outs {
		if r := wtRecv(t, ch, 10*time.Second, "a cohort call's outcome"); r.err != nil {
			t.Fatal(r.err)
		}
		again[i] = e.go_(context.Background(), "again", nil)
	}
	for _, ch := range again {
		if r := wtRecv(t, ch, 10*time.Second, "a second call's outcome"); r.err != nil || r.info.Type != "again" {
			t.Fatalf("second call: %v", r.err)
		}
	}
	// The held Enqueue, the cohort's batch, and the cohort's next calls in
	// one more batch.
	eq(t, "Enqueue RPCs", e.gate.count("Enqueue"), 1)
	eq(t, "EnqueueBatch RPCs", e.gate.count("EnqueueBatch"), 2)
}

// TestEnqueueBatchingLingerIsBounded: when fewer callers come back than
// the returned batch served, the gathered calls leave once the linger's
// bound has passed; a call made after that goes out at once, on its own.
func TestEnqueueBatchingLingerIsBounded(t *testing.T) {
	t.Parallel()
	e := batchSetup(t, conveyor.WithEnqueueInFlight(1))
	conveyor.SetEnqueueLingerForTest(e.c, 50*time.Millisecond)
	for _, ch := range e.shareCohort(10) {
		if r := wtRecv(t, ch, 10*time.Second, "a cohort call's outcome"); r.err != nil {
			t.Fatal(r.err)
		}
	}
	// One caller of ten comes back: its call leaves when the linger ends.
	if r := wtRecv(t, e.go_(context.Background(), "late", nil), 10*time.Second, "the lone call"); r.err != nil {
		t.Fatal(r.err)
	}
	if r := wtRecv(t, e.go_(context.Background(), "idle", nil), 10*time.Second, "an idle call"); r.err != nil {
		t.Fatal(r.err)
	}
	eq(t, "EnqueueBatch RPCs", e.gate.count("EnqueueBatch"), 1)
	eq(t, "Enqueue RPCs", e.gate.count("Enqueue"), 3) // held, lone, idle
}
