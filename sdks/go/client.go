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
// TaskService. It is safe for concurrent use; create one per service (one
// server, or the nodes of one; see NewClient) and reuse it, as it holds the
// HTTP/2 connections.
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
	hooks   []EnqueueHook
}

// NewClient returns a client of the server at addr, an http:// URL (HTTP/2
// without TLS, h2c) or an https:// URL (HTTP/2 over TLS), such as
// "http://127.0.0.1:7420". It does not connect: the first call does.
//
// addr may name several servers of one service (nodes sharing one
// database), separated by commas: "http://a:7420,http://b:7420". Each
// must be a valid URL, named once; schemes may differ. The Client sends
// its calls to the first server and, when a server cannot be reached or
// answers unavailable, tries the call on the next one, in turn, at most
// once per server; the server that answered keeps the calls after. A call
// whose outcome is unknown (its connection broke after the request may
// have been sent) is tried again only if repeating it is harmless:
// GetTask, and enqueues whose every task carries a TaskID. See the
// package doc's "Several servers".
func NewClient(addr string, opts ...Option) (*Client, error) {
	cfg, servers, err := newConnConfig(addr, opts)
	if err != nil {
		return nil, err
	}
	c := &Client{tasks: newTaskService(cfg, servers), hooks: cfg.enqueueHooks}
	if !cfg.noEnqueueBatching {
		c.batcher = &enqueueBatcher{tasks: c.tasks, maxInFlight: cfg.enqueueInFlight, lingerFor: lingerBound}
	}
	return c, nil
}

// newTaskService is the TaskService of servers: the one server's client,
// or a failoverTasks over several.
func newTaskService(cfg *connConfig, servers []endpoint) conveyorv1connect.TaskServiceClient {
	clients := make([]conveyorv1connect.TaskServiceClient, len(servers))
	for i, s := range servers {
		clients[i] = conveyorv1connect.NewTaskServiceClient(s.http, s.url, cfg.connectOptions()...)
	}
	if len(clients) == 1 {
		return clients[0]
	}
	return &failoverTasks{servers: clients}
}

// Enqueue stores one task of taskType carrying payload and returns it as
// committed, in its initial state: scheduled if delayed, blocked if it has
// dependencies, aggregating if grouped, else pending. The server applies
// the defaults of each option not given (queue "default", content type
// application/json, priority 4, max retry 25).
//
// A queue at its max_waiting holds the call until it has room, for at
// most a quarter of ctx's remaining deadline and 5 s, then fails it with
// ErrQueueFull: nothing was stored.
//
// Concurrent calls may share one EnqueueBatch RPC (see
// WithEnqueueBatching); each still gets its own task or error, the same as
// from an RPC of its own. (A shared RPC waits for room as long as its
// callers' latest deadline allows.) If ctx ends before the call's RPC
// leaves, the task is not sent; if it ends after, the task may or may not
// be stored, as with any RPC cut short: enqueue with a TaskID to retry
// safely.
func (c *Client) Enqueue(ctx context.Context, taskType string, payload []byte, opts ...TaskOption) (*TaskInfo, error) {
	return c.enqueue(ctx, NewTask(taskType, payload, opts...))
}

func (c *Client) enqueue(ctx context.Context, t *Task) (*TaskInfo, error) {
	if t.err != nil {
		return nil, t.err
	}
	t, done := c.runHooks(ctx, t)
	var info *TaskInfo
	var err error
	switch {
	case t.err != nil: // an option a hook added failed
		err = t.err
	case c.batcher != nil:
		info, err = c.batcher.enqueue(ctx, t.req)
	default:
		info, err = unaryEnqueue(ctx, c.tasks, t.req)
	}
	if done != nil {
		done(info, err)
	}
	return info, err
}

// BatchResult is the outcome of one task of EnqueueBatch: either the
// committed task or the reason it was not enqueued.
type BatchResult struct {
	// Task is the committed task; nil when Err is set.
	Task *TaskInfo
	// Err says why the task was not enqueued: an *Error with the server's
	// code and message for the item, which errors.Is matches as for
	// Enqueue (ErrAlreadyExists for a duplicate task id or unique key,
	// ErrInvalidArgument for an invalid task, ErrQueueFull for a task its
	// queue had no room for after the call's wait), or ErrInvalidArgument for
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
	index := make([]int, 0, len(tasks))                    // items[j] is tasks[index[j]]
	dones := make([]func(*TaskInfo, error), 0, len(tasks)) // dones[j] reports items[j]'s outcome to the hooks (nil: no hook)
	for i, t := range tasks {
		if t == nil {
			results[i].Err = optionErrorf("tasks[%d] is nil", i)
			continue
		}
		if t.err != nil {
			results[i].Err = t.err
			continue
		}
		t, done := c.runHooks(ctx, t)
		if t.err != nil {
			results[i].Err = t.err
			if done != nil {
				done(nil, t.err)
			}
			continue
		}
		items = append(items, t.req)
		index = append(index, i)
		dones = append(dones, done)
	}
	report := func() {
		for j, done := range dones {
			if done != nil {
				done(results[index[j]].Task, results[index[j]].Err)
			}
		}
	}
	if len(items) == 0 && len(tasks) > 0 {
		return results, nil // every task failed before the call
	}
	res, err := c.tasks.EnqueueBatch(ctx, connect.NewRequest(&conveyorv1.EnqueueBatchRequest{Items: items, Brief: true}))
	if err == nil && len(res.Msg.GetResults()) != len(items) {
		err = fmt.Errorf("conveyor: the server's EnqueueBatch response holds %d results for %d items", len(res.Msg.GetResults()), len(items))
	}
	if err != nil {
		err = wrapError(err)
		for _, i := range index {
			results[i].Err = err
		}
		report()
		return nil, err
	}
	for j, r := range res.Msg.GetResults() {
		i := index[j]
		switch {
		case r.GetError() != "":
			results[i].Err = itemError(r)
		case r.GetTask() == nil:
			results[i].Err = errors.New("conveyor: the server's EnqueueBatch result holds neither a task nor an error")
		default:
			// The request sent, with what the hooks added, is what the
			// server stored.
			results[i].Task = newTaskInfo(unbrief(r.GetTask(), items[j]))
		}
	}
	report()
	return results, nil
}

// unbrief fills a brief TaskInfo (EnqueueBatchRequest.brief) back from the
// request it answers, so that it is the TaskInfo a unary Enqueue returns:
// the server leaves out what the producer sent (payload, metadata and
// options; servers before dependency states left out the dependencies too)
// and stores them as sent. The copies keep the TaskInfo independent of the
// caller's Task and payload. A field the server did send is kept.
func unbrief(m *conveyorv1.TaskInfo, req *conveyorv1.EnqueueRequest) *conveyorv1.TaskInfo {
	if len(m.Payload) == 0 && len(req.GetPayload()) > 0 {
		m.Payload = bytes.Clone(req.GetPayload())
	}
	if len(m.Metadata) == 0 && len(req.GetMetadata()) > 0 {
		m.Metadata = maps.Clone(req.GetMetadata())
	}
	// An empty options message is no options: the server stores and
	// answers it as none.
	if m.Options == nil && req.GetOptions() != nil && proto.Size(req.GetOptions()) > 0 {
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
// ErrAlreadyExists) and nothing is stored. Tasks that would take a queue
// past its max_waiting wait for room as Enqueue does, then fail the call
// with ErrQueueFull. A task whose TaskID already
// exists is not an error: its existing TaskInfo is returned in its place.
// On success the committed tasks are returned in the order given.
func (c *Client) EnqueueTx(ctx context.Context, tasks []*Task) ([]*TaskInfo, error) {
	for i, t := range tasks {
		if t == nil {
			return nil, optionErrorf("tasks[%d] is nil", i)
		}
		if t.err != nil {
			return nil, optionErrorf("tasks[%d]: %s", i, t.err.msg)
		}
	}
	items := make([]*conveyorv1.EnqueueRequest, len(tasks))
	dones := make([]func(*TaskInfo, error), len(tasks)) // nil: no hook
	var err error
	for i, t := range tasks {
		t, dones[i] = c.runHooks(ctx, t)
		if t.err != nil && err == nil {
			err = optionErrorf("tasks[%d]: %s", i, t.err.msg) // an option a hook added failed
		}
		items[i] = t.req
	}
	var out []*TaskInfo
	if err == nil {
		out, err = c.enqueueTx(ctx, items)
	}
	for i, done := range dones {
		switch {
		case done == nil:
		case err != nil:
			done(nil, err) // every task shares the call's failure
		default:
			done(out[i], nil)
		}
	}
	return out, err
}

func (c *Client) enqueueTx(ctx context.Context, items []*conveyorv1.EnqueueRequest) ([]*TaskInfo, error) {
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
