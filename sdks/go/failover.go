package conveyor

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"syscall"

	"connectrpc.com/connect"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/gen/conveyor/v1/conveyorv1connect"
)

// failoverTasks is the TaskService of a Client given several servers: it
// sends each call to the server in use, and when that one fails the call
// in a way that allows it, moves on to the next server in turn and tries
// the call there, at most once per server and while the call's context
// lasts. The server that answered stays in use for the calls after.
//
// A call moves on when the server cannot have acted on it:
//   - the connection could not be made (refused, unreachable, the name
//     does not resolve): the request was never sent;
//   - the server answered unavailable: it is stopping, or cannot reach its
//     storage, and changed nothing (protocol §4).
//
// A call whose outcome is unknown, cut short by a transport error
// (unavailable, or a connection reset) after its request may have reached
// the server, moves on only if repeating it is harmless: GetTask, and enqueues whose every task
// carries a TaskID (the server stores a task id once; a repeat gets
// already_exists from Enqueue and EnqueueBatch, and the stored task from
// EnqueueTx). A unique key does not qualify: it lapses once its task
// completes, so a repeat could store the task twice. Any other error (a
// refusal such as invalid_argument, the end of the call's context) is the
// call's answer, as from a single server.
type failoverTasks struct {
	servers []conveyorv1connect.TaskServiceClient
	current atomic.Int64 // index of the server in use
}

var _ conveyorv1connect.TaskServiceClient = (*failoverTasks)(nil)

func (f *failoverTasks) Enqueue(ctx context.Context, req *connect.Request[conveyorv1.EnqueueRequest]) (*connect.Response[conveyorv1.EnqueueResponse], error) {
	return failover(ctx, f, req, req.Msg.GetTaskId() != "", conveyorv1connect.TaskServiceClient.Enqueue)
}

func (f *failoverTasks) EnqueueBatch(ctx context.Context, req *connect.Request[conveyorv1.EnqueueBatchRequest]) (*connect.Response[conveyorv1.EnqueueBatchResponse], error) {
	return failover(ctx, f, req, allHaveTaskIDs(req.Msg.GetItems()), conveyorv1connect.TaskServiceClient.EnqueueBatch)
}

func (f *failoverTasks) EnqueueTx(ctx context.Context, req *connect.Request[conveyorv1.EnqueueTxRequest]) (*connect.Response[conveyorv1.EnqueueTxResponse], error) {
	return failover(ctx, f, req, allHaveTaskIDs(req.Msg.GetItems()), conveyorv1connect.TaskServiceClient.EnqueueTx)
}

func (f *failoverTasks) GetTask(ctx context.Context, req *connect.Request[conveyorv1.GetTaskRequest]) (*connect.Response[conveyorv1.TaskInfo], error) {
	return failover(ctx, f, req, true, conveyorv1connect.TaskServiceClient.GetTask)
}

// allHaveTaskIDs reports whether every item names its task id, which makes
// sending them again harmless.
func allHaveTaskIDs(items []*conveyorv1.EnqueueRequest) bool {
	for _, it := range items {
		if it.GetTaskId() == "" {
			return false
		}
	}
	return true
}

// failover makes the call on the server in use and, as failoverTasks
// says, on the next ones. repeatable says whether the call may be made
// again when its outcome is unknown.
func failover[Req, Res any](ctx context.Context, f *failoverTasks, req *connect.Request[Req], repeatable bool,
	call func(conveyorv1connect.TaskServiceClient, context.Context, *connect.Request[Req]) (*connect.Response[Res], error),
) (*connect.Response[Res], error) {
	n := int64(len(f.servers))
	start := f.current.Load()
	var err error
	for i := range n {
		k := (start + i) % n
		var res *connect.Response[Res]
		res, err = call(f.servers[k], ctx, requestCopy(req))
		if err == nil {
			return res, nil
		}
		if !movesOn(err, repeatable) || ctx.Err() != nil {
			return nil, err
		}
		// Leave the server that failed, unless a concurrent call already
		// moved on.
		f.current.CompareAndSwap(k, (k+1)%n)
	}
	return nil, err
}

// requestCopy is a fresh request of the same message and headers: connect
// records the call's details in the request it is given, and each attempt
// is a call of its own.
func requestCopy[Req any](req *connect.Request[Req]) *connect.Request[Req] {
	c := connect.NewRequest(req.Msg)
	for k, v := range req.Header() {
		c.Header()[k] = v
	}
	return c
}

// movesOn reports whether a call that failed with err may be tried on the
// next server (see failoverTasks). Call it only while the call's context
// lasts.
func movesOn(err error, repeatable bool) bool {
	if connect.IsWireError(err) {
		// The server's answer: unavailable says it changed nothing.
		return connect.CodeOf(err) == connect.CodeUnavailable
	}
	if notSent(err) {
		return true
	}
	return repeatable && brokenTransport(err)
}

// brokenTransport reports whether err, not the server's answer, is the
// connection failing under a call: code unavailable, or a connection reset
// (which connect reports as canceled, as it does a call its caller gave
// up).
func brokenTransport(err error) bool {
	return connect.CodeOf(err) == connect.CodeUnavailable ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// notSent reports whether err is the failure to connect, before any byte
// of the request left: a dial error (which covers a name that does not
// resolve).
func notSent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}
