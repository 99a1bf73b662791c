package conveyor_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/oklog/ulid/v2"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/gen/conveyor/v1/conveyorv1connect"
	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

// TestClientServersSkipsDeadServer: a Client given a server that refuses
// connections first and a live one second makes every call on the live
// one, in each wire format, with enqueue batching on (concurrent calls
// sharing RPCs) and off.
func TestClientServersSkipsDeadServer(t *testing.T) {
	t.Parallel()
	live := servertest.Start(t, server.Config{})
	check := newClient(t, live.URL())
	addr := deadURL(t) + "," + live.URL()
	ctx := context.Background()
	for _, p := range protocols {
		for _, batching := range []bool{true, false} {
			c := newClient(t, addr, conveyor.WithProtocol(p), conveyor.WithEnqueueBatching(batching))
			info, err := c.Enqueue(ctx, "failover", nil)
			if err != nil {
				t.Fatalf("%s batching=%v: Enqueue: %v", p, batching, err)
			}
			if got := getTask(t, c, info.ID); got.ID != info.ID {
				t.Errorf("%s: GetTask through the list: %+v", p, got)
			}
			getTask(t, check, info.ID) // stored on the live server
			res, err := c.EnqueueBatch(ctx, []*conveyor.Task{conveyor.NewTask("failover", nil), conveyor.NewTask("failover", nil)})
			if err != nil || res[0].Err != nil || res[1].Err != nil {
				t.Fatalf("%s: EnqueueBatch: %v %+v", p, err, res)
			}
			if _, err := c.EnqueueTx(ctx, []*conveyor.Task{conveyor.NewTask("failover", nil)}); err != nil {
				t.Fatalf("%s: EnqueueTx: %v", p, err)
			}
			// Concurrent calls, gathered into shared EnqueueBatch RPCs when
			// batching is on.
			var wg sync.WaitGroup
			errs := make(chan error, 32)
			for range 32 {
				wg.Go(func() {
					info, err := c.Enqueue(ctx, "failover", nil)
					if err == nil {
						_, err = check.GetTask(ctx, info.ID)
					}
					errs <- err
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatalf("%s batching=%v: a concurrent Enqueue: %v", p, batching, err)
				}
			}
		}
	}
}

// unavailableTasks is a TaskService that answers every call unavailable,
// as a server that is shutting down or cannot reach its storage does.
type unavailableTasks struct {
	conveyorv1connect.UnimplementedTaskServiceHandler
	calls atomic.Int32
}

func (s *unavailableTasks) refuse() error {
	s.calls.Add(1)
	return connect.NewError(connect.CodeUnavailable, errors.New("the server is shutting down"))
}

func (s *unavailableTasks) Enqueue(context.Context, *connect.Request[conveyorv1.EnqueueRequest]) (*connect.Response[conveyorv1.EnqueueResponse], error) {
	return nil, s.refuse()
}

func (s *unavailableTasks) EnqueueBatch(context.Context, *connect.Request[conveyorv1.EnqueueBatchRequest]) (*connect.Response[conveyorv1.EnqueueBatchResponse], error) {
	return nil, s.refuse()
}

// TestClientServersMovesOnWhenServerUnavailable: a server's unavailable
// says it changed nothing, so the call moves to the next server even
// without a TaskID; the Client then stays with the server that answered.
func TestClientServersMovesOnWhenServerUnavailable(t *testing.T) {
	t.Parallel()
	stub := &unavailableTasks{}
	live := servertest.Start(t, server.Config{})
	c := newClient(t, serveStub(t)(conveyorv1connect.NewTaskServiceHandler(stub))+","+live.URL())
	ctx := context.Background()
	for i := range 3 {
		info, err := c.Enqueue(ctx, "failover", nil)
		if err != nil {
			t.Fatalf("Enqueue %d: %v", i, err)
		}
		getTask(t, newClient(t, live.URL()), info.ID)
	}
	if n := stub.calls.Load(); n != 1 {
		t.Errorf("the unavailable server got %d calls, want 1: the Client stays with the server that answered", n)
	}
}

// TestClientServersAllUnavailable: when every server fails the call, it
// is tried once on each and fails with the last one's error.
func TestClientServersAllUnavailable(t *testing.T) {
	t.Parallel()
	stub := &unavailableTasks{}
	c := newClient(t, deadURL(t)+","+serveStub(t)(conveyorv1connect.NewTaskServiceHandler(stub)), conveyor.WithEnqueueBatching(false))
	_, err := c.Enqueue(context.Background(), "failover", nil)
	if !errors.Is(err, conveyor.ErrUnavailable) || !connect.IsWireError(err) {
		t.Errorf("Enqueue: %v, want the second server's unavailable", err)
	}
	if n := stub.calls.Load(); n != 1 {
		t.Errorf("the unavailable server got %d calls, want 1", n)
	}
}

// breakerURL serves a loopback port that takes each connection, reads the
// start of the request and ends the connection without an answer: it
// closes it (the caller reads EOF: unavailable) or, with reset, resets it
// (the caller reads ECONNRESET, which connect reports as canceled). Either
// way a call to it fails with a transport error after its request was
// sent, its outcome unknown to the caller. conns counts the connections
// taken.
func breakerURL(t *testing.T, reset bool) (url string, conns *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	conns = new(atomic.Int32)
	var wg sync.WaitGroup
	t.Cleanup(func() {
		_ = ln.Close()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			breakConn(c.(*net.TCPConn), reset)
		}
	})
	return "http://" + ln.Addr().String(), conns
}

// breakConn reads the start of a request from c, then resets c or closes
// it. A close first reads all the caller sends until it hangs up, since
// closing a socket with bytes left unread resets it.
func breakConn(c *net.TCPConn, reset bool) {
	defer func() { _ = c.Close() }()
	buf := make([]byte, 4096)
	for read := 0; read < 100; {
		n, err := c.Read(buf)
		read += n
		if err != nil {
			return
		}
	}
	if reset {
		_ = c.SetLinger(0)
		return
	}
	_ = c.CloseWrite()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second)) // bounds the wait for a caller that does not hang up
	_, _ = io.Copy(io.Discard, c)
}

// TestClientServersOutcomeUnknown: a call whose connection broke after
// its request was sent may have been stored, so it moves to the next
// server only if repeating it is harmless: GetTask, and enqueues whose
// every task carries a TaskID. Other enqueues fail with the error, and
// nothing reaches the next server.
func TestClientServersOutcomeUnknown(t *testing.T) {
	t.Parallel()
	live := servertest.Start(t, server.Config{})
	check := newClient(t, live.URL())
	ctx := context.Background()
	stored, err := check.Enqueue(ctx, "failover", nil)
	if err != nil {
		t.Fatal(err)
	}
	id := func() conveyor.TaskOption { return conveyor.TaskID(ulid.Make().String()) }
	for _, tc := range []struct {
		name       string
		repeatable bool
		call       func(c *conveyor.Client, queue string) error
	}{
		{"Enqueue", false, func(c *conveyor.Client, q string) error {
			_, err := c.Enqueue(ctx, "t", nil, conveyor.Queue(q))
			return err
		}},
		{"Enqueue with a unique key", false, func(c *conveyor.Client, q string) error {
			_, err := c.Enqueue(ctx, "t", nil, conveyor.Queue(q), conveyor.Unique("k", time.Hour))
			return err
		}},
		{"Enqueue with a TaskID", true, func(c *conveyor.Client, q string) error {
			_, err := c.Enqueue(ctx, "t", nil, conveyor.Queue(q), id())
			return err
		}},
		{"EnqueueBatch with a task without a TaskID", false, func(c *conveyor.Client, q string) error {
			_, err := c.EnqueueBatch(ctx, []*conveyor.Task{conveyor.NewTask("t", nil, conveyor.Queue(q), id()), conveyor.NewTask("t", nil, conveyor.Queue(q))})
			return err
		}},
		{"EnqueueBatch with TaskIDs", true, func(c *conveyor.Client, q string) error {
			res, err := c.EnqueueBatch(ctx, []*conveyor.Task{conveyor.NewTask("t", nil, conveyor.Queue(q), id()), conveyor.NewTask("t", nil, conveyor.Queue(q), id())})
			if err == nil {
				err = errors.Join(res[0].Err, res[1].Err)
			}
			return err
		}},
		{"EnqueueTx", false, func(c *conveyor.Client, q string) error {
			_, err := c.EnqueueTx(ctx, []*conveyor.Task{conveyor.NewTask("t", nil, conveyor.Queue(q))})
			return err
		}},
		{"EnqueueTx with TaskIDs", true, func(c *conveyor.Client, q string) error {
			_, err := c.EnqueueTx(ctx, []*conveyor.Task{conveyor.NewTask("t", nil, conveyor.Queue(q), id())})
			return err
		}},
		{"GetTask", true, func(c *conveyor.Client, _ string) error {
			_, err := c.GetTask(ctx, stored.ID)
			return err
		}},
	} {
		for _, reset := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/reset=%v", tc.name, reset), func(t *testing.T) {
				t.Parallel()
				broken, conns := breakerURL(t, reset)
				c := newClient(t, broken+","+live.URL())
				queue := "doubt-" + ulid.Make().String()
				err := tc.call(c, queue)
				if n := conns.Load(); n != 1 {
					t.Fatalf("the breaking server took %d connections, want 1 (err %v)", n, err)
				}
				if tc.repeatable {
					if err != nil {
						t.Fatalf("a repeatable call: %v, want it made on the next server", err)
					}
					return
				}
				want := connect.CodeUnavailable
				if reset {
					want = connect.CodeCanceled
				}
				if connect.CodeOf(err) != want {
					t.Fatalf("a call in doubt: %v, want the transport's error (code %s)", err, want)
				}
				if n := queuedOn(t, live, queue); n != 0 {
					t.Errorf("the next server holds %d tasks of the call in doubt, want none", n)
				}
			})
		}
	}
}

// queuedOn counts the tasks of queue that s holds waiting to run.
func queuedOn(t *testing.T, s *servertest.Server, queue string) int64 {
	t.Helper()
	admin := conveyorv1connect.NewAdminServiceClient(servertest.HTTPClient(), s.URL(), connect.WithGRPC())
	res, err := admin.ListQueues(context.Background(), connect.NewRequest(&conveyorv1.ListQueuesRequest{}))
	if err != nil {
		t.Fatalf("list queues: %v", err)
	}
	for _, q := range res.Msg.GetQueues() {
		if q.GetName() == queue {
			return q.GetPending() + q.GetScheduled()
		}
	}
	return 0
}

// TestClientServersMovesOnWhenServerStops: a Client whose server shuts
// down makes its next calls on the next server: the stopped one refuses
// connections.
func TestClientServersMovesOnWhenServerStops(t *testing.T) {
	t.Parallel()
	a := servertest.Start(t, server.Config{})
	b := servertest.Start(t, server.Config{})
	ctx := context.Background()
	clients := make([]*conveyor.Client, len(protocols))
	for i, p := range protocols {
		clients[i] = newClient(t, a.URL()+","+b.URL(), conveyor.WithProtocol(p))
		info, err := clients[i].Enqueue(ctx, "failover", nil)
		if err != nil {
			t.Fatalf("%s: Enqueue: %v", p, err)
		}
		getTask(t, newClient(t, a.URL()), info.ID) // on the first server
	}
	stop, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := a.Stop(stop); err != nil {
		t.Fatal(err)
	}
	for i, p := range protocols {
		info, err := clients[i].Enqueue(ctx, "failover", nil)
		if err != nil {
			t.Fatalf("%s: Enqueue after the first server stopped: %v", p, err)
		}
		getTask(t, newClient(t, b.URL()), info.ID)
	}
}
