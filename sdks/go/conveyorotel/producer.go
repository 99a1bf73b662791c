package conveyorotel

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
)

// WithTracing is a Client option that traces every task the Client sends:
// see EnqueueHook. It is conveyor.WithEnqueueHook(EnqueueHook(opts...)).
func WithTracing(opts ...Option) conveyor.Option {
	return conveyor.WithEnqueueHook(EnqueueHook(opts...))
}

// EnqueueHook returns a conveyor.EnqueueHook that starts a PRODUCER span
// "conveyor.enqueue <type>" for each task, a child of the span in the
// enqueue call's context, and adds that span's context to the task's
// metadata through the propagator (traceparent and tracestate by default),
// so that Middleware can continue the trace on the worker. The span ends
// when the task's outcome is known: with the task's id and state on
// success, or the error (and status error) when the task was not
// enqueued. The caller's Task is not changed; the metadata goes on a copy.
//
// A task that is not sampled still carries the context, so that the
// decision travels with it.
func EnqueueHook(opts ...Option) conveyor.EnqueueHook {
	cfg := newConfig(opts)
	tracer := cfg.tracer()
	return func(ctx context.Context, t *conveyor.Task) (*conveyor.Task, func(*conveyor.TaskInfo, error)) {
		queue := t.Queue()
		if queue == "" {
			queue = defaultQueue
		}
		attrs := []attribute.KeyValue{system, keyOperationType.String("send"), keyOperationName.String("enqueue"),
			keyDestination.String(queue), keyTaskType.String(t.Type())}
		if id := t.ID(); id != "" {
			attrs = append(attrs, keyMessageID.String(id))
		}
		ctx, span := tracer.Start(ctx, "conveyor.enqueue "+t.Type(),
			trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(attrs...))
		carrier := propagation.MapCarrier{}
		cfg.propagator.Inject(ctx, carrier)
		if len(carrier) > 0 {
			t = t.With(conveyor.Metadata(carrier))
		}
		return t, func(info *conveyor.TaskInfo, err error) {
			switch {
			case err != nil:
				span.RecordError(err)
				span.SetStatus(codes.Error, err.Error())
			case info != nil:
				span.SetAttributes(keyMessageID.String(info.ID), keyTaskState.String(info.State.String()))
			}
			span.End()
		}
	}
}
