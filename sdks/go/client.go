package conveyor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/gen/conveyor/v1/conveyorv1connect"
)

// Client enqueues tasks and looks them up through the server's
// TaskService. It is safe for concurrent use; create one per server and
// reuse it, as it holds the HTTP/2 connection.
//
// Every method returns the server's errors as an *Error, which errors.Is
// matches against ErrInvalidArgument, ErrAlreadyExists, ErrNotFound,
// ErrUnauthenticated and ErrUnavailable.
//
// Concurrent Enqueue calls share RPCs unless WithEnqueueBatching(false)
// says otherwise; see WithEnqueueBatching.
type Client struct {
	tasks   conveyorv1connect.TaskServiceClient
	batcher *enqueueBatcher // nil when enqueue batching is off
}

// NewClient returns a client of the server at addr, an http:// URL (HTTP/2
// without TLS, h2c) or an https:// URL (HTTP/2 over TLS), such as
// "http://127.0.0.1:7420". It does not connect: the first call does.
func NewClient(addr string, opts ...Option) (*Client, error) {
	cfg, url, err := newConnConfig(addr, opts)
	if err != nil {
		return nil, err
	}
	c := &Client{tasks: conveyorv1connect.NewTaskServiceClient(cfg.httpClient, url, cfg.connectOptions()...)}
	if !cfg.noEnqueueBatching {
		c.batcher = &enqueueBatcher{tasks: c.tasks, maxInFlight: cfg.enqueueInFlight}
	}
	return c, nil
}

// Enqueue stores one task of taskType carrying payload and returns it as
// committed, in its initial state: scheduled if delayed, blocked if it has
// dependencies, aggregating if grouped, else pending. The server applies
// the defaults of each option not given (queue "default", content type
// application/json, priority 4, max retry 25).
//
// Concurrent calls may share one EnqueueBatch RPC (see
// WithEnqueueBatching); each still gets its own task or error, the same as
// from an RPC of its own. If ctx ends before the call's RPC leaves, the
// task is not sent; if it ends after, the task may or may not be stored,
// as with any RPC cut short: enqueue with a TaskID to retry safely.
func (c *Client) Enqueue(ctx context.Context, taskType string, payload []byte, opts ...TaskOption) (*TaskInfo, error) {
	return c.enqueue(ctx, NewTask(taskType, payload, opts...))
}

func (c *Client) enqueue(ctx context.Context, t *Task) (*TaskInfo, error) {
	if t.err != nil {
		return nil, t.err
	}
	if c.batcher != nil {
		return c.batcher.enqueue(ctx, t.req)
	}
	return unaryEnqueue(ctx, c.tasks, t.req)
}

// BatchResult is the outcome of one task of EnqueueBatch: either the
// committed task or the reason it was not enqueued.
type BatchResult struct {
	// Task is the committed task; nil when Err is set.
	Task *TaskInfo
	// Err says why the task was not enqueued: an *Error with the server's
	// code and message for the item, which errors.Is matches as for
	// Enqueue (ErrAlreadyExists for a duplicate task id or unique key,
	// ErrInvalidArgument for an invalid task), or ErrInvalidArgument for
	// a problem the SDK found itself (a nil task or an option's programmer
	// error). A server older than per-item codes sends none: its items'
	// errors then have code unknown and match no sentinel.
	Err error
}

// EnqueueBatch stores 1..1000 tasks in one call. The tasks succeed or fail
// independently: results[i] is the outcome of tasks[i]. The call itself
// fails only if the batch is empty or too large (ErrInvalidArgument) or the
// server cannot be reached.
func (c *Client) EnqueueBatch(ctx context.Context, tasks []*Task) ([]BatchResult, error) {
	results := make([]BatchResult, len(tasks))
	items := make([]*conveyorv1.EnqueueRequest, 0, len(tasks))
	index := make([]int, 0, len(tasks)) // items[j] is tasks[index[j]]
	for i, t := range tasks {
		switch {
		case t == nil:
			results[i].Err = optionErrorf("tasks[%d] is nil", i)
		case t.err != nil:
			results[i].Err = t.err
		default:
			items = append(items, t.req)
			index = append(index, i)
		}
	}
	if len(items) == 0 && len(tasks) > 0 {
		return results, nil // every task failed before the call
	}
	res, err := c.tasks.EnqueueBatch(ctx, connect.NewRequest(&conveyorv1.EnqueueBatchRequest{Items: items, Brief: true}))
	if err != nil {
		return nil, wrapError(err)
	}
	got := res.Msg.GetResults()
	if len(got) != len(items) {
		return nil, fmt.Errorf("conveyor: the server's EnqueueBatch response holds %d results for %d items", len(got), len(items))
	}
	for j, r := range got {
		i := index[j]
		switch {
		case r.GetError() != "":
			results[i].Err = itemError(r)
		case r.GetTask() == nil:
			results[i].Err = errors.New("conveyor: the server's EnqueueBatch result holds neither a task nor an error")
		default:
			results[i].Task = newTaskInfo(unbrief(r.GetTask(), tasks[i].req))
		}
	}
	return results, nil
}

// unbrief fills a brief TaskInfo (EnqueueBatchRequest.brief) back from the
// request it answers, so that it is the TaskInfo a unary Enqueue returns:
// the server leaves out what the producer sent (payload, metadata, options
// and dependencies) and stores them as sent. The copies keep the TaskInfo
// independent of the caller's Task and payload. A field the server did
// send (one that ignores brief) is kept.
func unbrief(m *conveyorv1.TaskInfo, req *conveyorv1.EnqueueRequest) *conveyorv1.TaskInfo {
	if len(m.Payload) == 0 && len(req.GetPayload()) > 0 {
		m.Payload = bytes.Clone(req.GetPayload())
	}
	if len(m.Metadata) == 0 && len(req.GetMetadata()) > 0 {
		m.Metadata = maps.Clone(req.GetMetadata())
	}
	if m.Options == nil && req.GetOptions() != nil {
		m.Options = proto.CloneOf(req.GetOptions())
	}
	if len(m.DependsOn) == 0 && len(m.Options.GetDependsOn()) > 0 {
		m.DependsOn = make([]*conveyorv1.TaskDependency, len(m.Options.GetDependsOn()))
		for i, d := range m.Options.GetDependsOn() {
			m.DependsOn[i] = proto.CloneOf(d)
		}
	}
	return m
}

// itemError is the error of a failed EnqueueBatch item, as an *Error of
// the code the server gave for it (code unknown when it gave none).
func itemError(r *conveyorv1.EnqueueBatchResult) error {
	code := connect.CodeUnknown
	if err := code.UnmarshalText([]byte(r.GetCode())); err != nil {
		code = connect.CodeUnknown
	}
	return &Error{err: connect.NewError(code, errors.New(r.GetError()))}
}

// EnqueueTx stores 1..1000 tasks atomically: all of them or none. If any
// task fails (a validation error, a unique key already held or shared by
// two of the tasks), the call fails with that error (ErrInvalidArgument or
// ErrAlreadyExists) and nothing is stored. A task whose TaskID already
// exists is not an error: its existing TaskInfo is returned in its place.
// On success the committed tasks are returned in the order given.
func (c *Client) EnqueueTx(ctx context.Context, tasks []*Task) ([]*TaskInfo, error) {
	items := make([]*conveyorv1.EnqueueRequest, len(tasks))
	for i, t := range tasks {
		if t == nil {
			return nil, optionErrorf("tasks[%d] is nil", i)
		}
		if t.err != nil {
			return nil, optionErrorf("tasks[%d]: %s", i, t.err.msg)
		}
		items[i] = t.req
	}
	res, err := c.tasks.EnqueueTx(ctx, connect.NewRequest(&conveyorv1.EnqueueTxRequest{Items: items}))
	if err != nil {
		return nil, wrapError(err)
	}
	got := res.Msg.GetTasks()
	if len(got) != len(items) {
		return nil, fmt.Errorf("conveyor: the server's EnqueueTx response holds %d tasks for %d items", len(got), len(items))
	}
	out := make([]*TaskInfo, len(got))
	for i, m := range got {
		out[i] = newTaskInfo(m)
	}
	return out, nil
}

// GetTask returns the task with id. An unknown (or purged) id fails with
// ErrNotFound, an empty one with ErrInvalidArgument.
func (c *Client) GetTask(ctx context.Context, id string) (*TaskInfo, error) {
	res, err := c.tasks.GetTask(ctx, connect.NewRequest(&conveyorv1.GetTaskRequest{Id: id}))
	if err != nil {
		return nil, wrapError(err)
	}
	return newTaskInfo(res.Msg), nil
}
