package conveyor

import (
	"context"
	"maps"

	"google.golang.org/protobuf/proto"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
)

// EnqueueHook observes, and may amend, each task a Client sends: the
// producer's side of tracing (see the conveyorotel package), metrics or
// audit. The Client calls it in the caller's goroutine, with the call's
// context, before the task is sent. It returns the task to send in t's
// place (t itself, or t.With(...) to add options; a hook must not modify
// t, which belongs to the caller) and a function that the Client calls
// once with that task's outcome: its TaskInfo, or the error that it was
// not enqueued (a nil function is not called).
//
// Enqueue and EnqueueJSON pass their one task; EnqueueBatch and EnqueueTx
// pass each of theirs in order, and report each outcome: its own for
// EnqueueBatch, the call's for EnqueueTx. Tasks the SDK refuses before
// sending (nil, or with an option's programmer error) are not passed.
type EnqueueHook func(ctx context.Context, t *Task) (*Task, func(*TaskInfo, error))

// WithEnqueueHook adds h to the hooks a Client runs for each task it
// sends (see EnqueueHook). Hooks run in the order they were added, and
// their outcome functions in the reverse order. Defaults to none. A Worker
// ignores this option.
func WithEnqueueHook(h EnqueueHook) Option {
	return optionFunc(func(c *connConfig) {
		if h != nil {
			c.enqueueHooks = append(c.enqueueHooks, h)
		}
	})
}

// runHooks passes t through the Client's hooks and returns the task to
// send and the function that reports its outcome (nil without hooks).
func (c *Client) runHooks(ctx context.Context, t *Task) (*Task, func(*TaskInfo, error)) {
	if len(c.hooks) == 0 {
		return t, nil
	}
	var dones []func(*TaskInfo, error)
	for _, h := range c.hooks {
		next, done := h(ctx, t)
		if next != nil {
			t = next
		}
		if done != nil {
			dones = append(dones, done)
		}
	}
	if len(dones) == 0 {
		return t, nil
	}
	return t, func(info *TaskInfo, err error) {
		for i := len(dones) - 1; i >= 0; i-- {
			dones[i](info, err)
		}
	}
}

// Type is the task's type.
func (t *Task) Type() string { return t.req.GetType() }

// Queue is the task's queue as given with Queue; empty means the server's
// default, "default".
func (t *Task) Queue() string { return t.req.GetQueue() }

// ID is the client-assigned id given with TaskID; empty when the server
// assigns one.
func (t *Task) ID() string { return t.req.GetTaskId() }

// With returns a copy of t with opts applied after t's own options; t is
// not changed. The copy shares t's payload (which is not copied, as with
// NewTask) but not its metadata or options.
func (t *Task) With(opts ...TaskOption) *Task {
	r := t.req
	cp := &Task{err: t.err, req: &conveyorv1.EnqueueRequest{
		TaskId:      r.GetTaskId(),
		Queue:       r.GetQueue(),
		Type:        r.GetType(),
		Payload:     r.GetPayload(),
		ContentType: r.GetContentType(),
		Metadata:    maps.Clone(r.GetMetadata()),
	}}
	if r.GetOptions() != nil {
		cp.req.Options = proto.CloneOf(r.GetOptions())
	}
	for _, o := range opts {
		if o != nil {
			o.applyToTask(cp)
		}
	}
	return cp
}
