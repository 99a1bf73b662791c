package conveyorotel

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
)

// Middleware returns a worker middleware (see conveyor.Worker.Use) that
// runs each handler inside a CONSUMER span "conveyor.process <type>". The
// span is a child of the producer's span whose context the task's
// metadata carries (see EnqueueHook), so every attempt of the task joins
// the trace that enqueued it; a task that carries none starts a trace of
// its own. The handler's context holds the span.
//
// Besides the messaging attributes, the span records the task's retry
// count (conveyor.task.retried), its attempt id when the server sends one
// (conveyor.attempt.id), and the outcome the handler's return maps to
// (conveyor.task.outcome: success, retry, skip_retry, released by a
// draining worker, or abandoned when the session was lost). A handler
// error is recorded on the span and sets its status to error; so does a
// panic (outcome retry, as the worker reports it), which then goes on to
// the worker's own recovery.
//
// Like every middleware, it does not wrap batch handlers.
func Middleware(opts ...Option) conveyor.Middleware {
	cfg := newConfig(opts)
	tracer := cfg.tracer()
	return func(next conveyor.Handler) conveyor.Handler {
		return conveyor.HandlerFunc(func(ctx context.Context, d *conveyor.Delivery) error {
			parent := cfg.propagator.Extract(ctx, propagation.MapCarrier(d.Metadata))
			attrs := []attribute.KeyValue{system, keyOperationType.String("process"), keyOperationName.String("process"),
				keyDestination.String(d.Queue), keyMessageID.String(d.ID), keyTaskType.String(d.Type),
				keyRetried.Int(d.Retried)}
			if d.AttemptID != "" {
				attrs = append(attrs, keyAttemptID.String(d.AttemptID))
			}
			start := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(attrs...)}
			if sc := trace.SpanContextFromContext(parent); !sc.IsValid() || !sc.IsRemote() {
				// No producer context: whatever span the worker's own
				// context holds is no parent of this task's processing.
				start = append(start, trace.WithNewRoot())
			}
			spanCtx, span := tracer.Start(parent, "conveyor.process "+d.Type, start...)
			defer span.End()
			defer endPanicked(ctx, span)
			err := next.ProcessTask(spanCtx, d)
			setResult(ctx, span, attemptErr(d, err))
			return err
		})
	}
}

// setResult records what the handler's return (err) means on its span.
func setResult(ctx context.Context, span trace.Span, err error) {
	span.SetAttributes(keyOutcome.String(outcome(ctx, err)))
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
}

// attemptErr is the error the worker reports for a handler's return: err,
// or for a success whose result passes conveyor.MaxResultBytes, the
// failure the worker turns it into (RETRY).
func attemptErr(d *conveyor.Delivery, err error) error {
	if n := len(d.Result()); err == nil && n > conveyor.MaxResultBytes {
		return fmt.Errorf("result is %d bytes; the limit is %d (1 MiB)", n, conveyor.MaxResultBytes)
	}
	return err
}

// endPanicked marks the span of a handler that panicked as the failure
// the worker reports for it (it recovers the panic outside every
// middleware and fails the attempt), then lets the panic go on to it.
// Without this the span would end with no status, as a success.
func endPanicked(ctx context.Context, span trace.Span) {
	p := recover()
	if p == nil {
		return
	}
	setResult(ctx, span, fmt.Errorf("panic: %v", p))
	panic(p)
}

// outcome names what the worker reports for a handler's return (see
// conveyor.Handler), from the handler's context and error.
func outcome(ctx context.Context, err error) string {
	cause := context.Cause(ctx)
	switch {
	case err == nil:
		return "success"
	case ctx.Err() != nil && errors.Is(cause, conveyor.ErrWorkerShutdown):
		return "released"
	case ctx.Err() != nil && errors.Is(cause, conveyor.ErrSessionLost):
		return "abandoned"
	case errors.Is(err, conveyor.ErrSkipRetry):
		return "skip_retry"
	default:
		return "retry"
	}
}
