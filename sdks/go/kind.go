package conveyor

import (
	"context"
	"fmt"
	"reflect"
)

// Kind is a task payload that names its own task type, so that producers
// and handlers share one Go type rather than repeating a type string at
// every site: EnqueueKind enqueues it under Kind(), and HandleKind
// registers a handler for it under the same name.
//
//	type SendEmail struct{ To, Subject string }
//
//	func (SendEmail) Kind() string { return "email:send" }
//
// Kind must return a constant: HandleKind calls it on a zero value of the
// type (a new zero value, for a pointer type), never on a task's payload.
// Give it a value receiver, or a pointer receiver that reads no field. The
// payload travels as JSON (encoding/json), as with EnqueueJSON and
// HandleJSON.
type Kind interface {
	Kind() string
}

// KindWithOptions is a Kind that carries default options, such as its
// queue or its retry budget: EnqueueKind and NewKindTask apply them before
// the options of the call, so that a call's option overrides a default of
// the same kind.
//
//	func (SendEmail) KindOptions() []conveyor.TaskOption {
//		return []conveyor.TaskOption{conveyor.Queue("mail"), conveyor.MaxRetry(5)}
//	}
type KindWithOptions interface {
	Kind
	KindOptions() []TaskOption
}

// EnqueueKind encodes v with encoding/json and enqueues it as a task of
// type v.Kind(), with v's default options (see KindWithOptions) and then
// opts. It is EnqueueJSON with the type taken from v; see Client.Enqueue
// for the rest.
func EnqueueKind[T Kind](ctx context.Context, c *Client, v T, opts ...TaskOption) (*TaskInfo, error) {
	t, err := NewKindTask(v, opts...)
	if err != nil {
		return nil, err
	}
	return c.enqueue(ctx, t)
}

// NewKindTask is NewJSONTask with the type taken from v: a task of type
// v.Kind() carrying v as JSON, with v's default options (see
// KindWithOptions) and then opts, for Client.EnqueueBatch and EnqueueTx.
// It fails only if v cannot be encoded.
func NewKindTask[T Kind](v T, opts ...TaskOption) (*Task, error) {
	return NewJSONTask(v.Kind(), v, kindOptions(v, opts)...)
}

// kindOptions is v's default options followed by opts.
func kindOptions(v Kind, opts []TaskOption) []TaskOption {
	d, ok := v.(KindWithOptions)
	if !ok {
		return opts
	}
	defaults := d.KindOptions()
	all := make([]TaskOption, 0, len(defaults)+len(opts))
	return append(append(all, defaults...), opts...)
}

// HandleKind registers fn for the tasks of T's kind, decoding each payload
// into a T exactly as HandleJSON does: a payload that does not decode, or
// whose content type is not JSON, fails the task with SkipRetry. It panics
// if T is an interface type (a payload cannot be decoded into one), and
// otherwise as Worker.Handle does.
func HandleKind[T Kind](w *Worker, fn func(ctx context.Context, d *Delivery, v T) error) {
	HandleJSON(w, KindOf[T](), fn)
}

// KindOf returns the task type of T's tasks: Kind() of a zero T, or of a
// new zero value when T is a pointer type. It panics if T is an interface
// type, which names no kind of its own.
func KindOf[T Kind]() string {
	rt := reflect.TypeFor[T]()
	switch rt.Kind() {
	case reflect.Interface:
		panic(fmt.Sprintf("conveyor: %s is an interface type: a kind needs a concrete payload type", rt))
	case reflect.Pointer:
		return reflect.New(rt.Elem()).Interface().(T).Kind()
	}
	var zero T
	return zero.Kind()
}
