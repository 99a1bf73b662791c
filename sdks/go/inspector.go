package conveyor

import (
	"context"
	"errors"
	"sync/atomic"

	"connectrpc.com/connect"

	"github.com/conveyor-dev/conveyor/gen/conveyor/v1/conveyorv1connect"
)

// Inspector is the operator's side of the server from code: it lists and
// acts on tasks, pauses and configures queues, manages cron entries, and
// reads the groups, workers, releases and nodes, through the server's
// AdminService (the service the dashboard and the CLI use). It is safe
// for concurrent use; like a Client, create one and reuse it, as it holds
// the HTTP/2 connections.
//
// Every method returns the server's errors as the Client does: an *Error,
// which errors.Is matches against ErrInvalidArgument, ErrNotFound,
// ErrUnauthenticated and ErrUnavailable (and whose Code says
// connect.CodeFailedPrecondition for an action the state of what it names
// refuses, such as deleting a running task or a queue that still holds
// tasks: docs/protocol.md, "Errors").
type Inspector struct {
	admin *adminServers
	tasks conveyorv1connect.TaskServiceClient
}

// NewInspector returns an Inspector of the server at addr, with the
// connection options a Client takes (WithToken, WithProtocol,
// WithTLSConfig, WithHTTPClient, WithGzip) and the same address rules:
// an http:// or https:// URL, or several servers of one service separated
// by commas (see NewClient and the package doc's "Several servers"). It
// does not connect: the first call does.
//
// It is a constructor of its own, not a method of Client: a Client keeps
// only its TaskService, and an Inspector is usually wanted where no
// Client is (an operator's tool, a test), so it dials for itself. The two
// share connections only through WithHTTPClient. The enqueue options
// (WithEnqueueBatching, WithEnqueueInFlight, WithEnqueueHook) are accepted
// so that one option list can serve both, and ignored, as a Worker
// ignores them: an Inspector enqueues nothing. WithLogger is ignored too:
// an Inspector logs nothing.
//
// With several servers, a call moves on to the next server when the one
// in use could not have acted on it (it could not be reached, or answered
// unavailable); a call cut short after its request may have left moves on
// only when repeating it is harmless: the reads (Get*, List*, AllTasks),
// and the calls that set a state rather than step it (PauseQueue,
// ResumeQueue, UpdateQueueConfig, PauseCron, ResumeCron, DrainRelease).
func NewInspector(addr string, opts ...Option) (*Inspector, error) {
	cfg, servers, err := newConnConfig(addr, opts)
	if err != nil {
		return nil, err
	}
	a := &adminServers{servers: make([]conveyorv1connect.AdminServiceClient, len(servers))}
	for i, s := range servers {
		a.servers[i] = conveyorv1connect.NewAdminServiceClient(s.http, s.url, cfg.connectOptions()...)
	}
	return &Inspector{admin: a, tasks: newTaskService(cfg, servers)}, nil
}

// adminServers is the AdminService of every server an Inspector was
// given, and the one in use: the index moves on as failoverTasks' does.
type adminServers struct {
	servers []conveyorv1connect.AdminServiceClient
	current atomic.Int64
}

// Whether a call may be sent again when its outcome is unknown (see
// NewInspector).
const (
	repeatable = true
	once       = false
)

// adminCall makes one unary AdminService call on the server in use and,
// when it fails in a way movesOn allows, on the next ones in turn, at
// most once each; it returns the response message, or the error as an
// *Error.
func adminCall[Req, Res any](ctx context.Context, a *adminServers, msg *Req, repeat bool,
	call func(conveyorv1connect.AdminServiceClient, context.Context, *connect.Request[Req]) (*connect.Response[Res], error),
) (*Res, error) {
	n := int64(len(a.servers))
	start := a.current.Load()
	var err error
	for i := range n {
		k := (start + i) % n
		var res *connect.Response[Res]
		res, err = call(a.servers[k], ctx, connect.NewRequest(msg))
		if err == nil {
			return res.Msg, nil
		}
		if n == 1 || !movesOn(err, repeat) || ctx.Err() != nil {
			break
		}
		a.current.CompareAndSwap(k, (k+1)%n)
	}
	return nil, wrapError(err)
}

// notFoundf is an *Error of code not_found that the SDK makes itself, for
// a name a listing did not hold; it matches ErrNotFound as the server's
// own not_found does.
func notFoundf(msg string) error {
	return &Error{err: connect.NewError(connect.CodeNotFound, errors.New(msg))}
}
