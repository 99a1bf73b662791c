package conveyor

import (
	"context"
	"errors"
	"log/slog"
	"time"
)

// Middleware wraps a Handler with behavior of its own: logging, metrics,
// tracing, recovery of a domain's errors. See Worker.Use.
type Middleware func(Handler) Handler

// LoggingMiddleware logs each task with l: at Debug when it starts, and when
// it finishes at Info (success), Warn (a failure) or Info (a failure because
// the worker is shutting down or lost its session), with the task's id,
// type, queue, attempt and duration. A nil l is slog.Default().
func LoggingMiddleware(l *slog.Logger) Middleware {
	if l == nil {
		l = slog.Default()
	}
	return func(next Handler) Handler {
		return HandlerFunc(func(ctx context.Context, d *Delivery) error {
			attrs := []any{"task", d.ID, "type", d.Type, "queue", d.Queue, "retried", d.Retried}
			l.DebugContext(ctx, "task started", attrs...)
			start := time.Now()
			err := next.ProcessTask(ctx, d)
			attrs = append(attrs, "elapsed", time.Since(start))
			cause := context.Cause(ctx)
			switch {
			case err == nil:
				l.InfoContext(ctx, "task succeeded", attrs...)
			case ctx.Err() != nil && (errors.Is(cause, ErrWorkerShutdown) || errors.Is(cause, ErrSessionLost)):
				l.InfoContext(ctx, "task abandoned", append(attrs, "reason", cause, "err", err)...)
			default:
				l.WarnContext(ctx, "task failed", append(attrs, "err", err, "skip_retry", errors.Is(err, ErrSkipRetry))...)
			}
			return err
		})
	}
}

// Hooks observe handlers, for metrics and tracing. Either func may be nil.
// Build the middleware with HooksMiddleware.
type Hooks struct {
	// OnStart runs before the handler. The context it returns is the one
	// the handler gets (return ctx unchanged if there is nothing to add,
	// such as a tracing span).
	OnStart func(ctx context.Context, d *Delivery) context.Context
	// OnFinish runs after the handler with its error and how long it ran.
	// It does not run when the handler panics: the worker recovers the
	// panic outside every middleware.
	OnFinish func(ctx context.Context, d *Delivery, err error, elapsed time.Duration)
}

// HooksMiddleware calls h.OnStart and h.OnFinish around each task.
func HooksMiddleware(h Hooks) Middleware {
	return func(next Handler) Handler {
		return HandlerFunc(func(ctx context.Context, d *Delivery) error {
			if h.OnStart != nil {
				if c := h.OnStart(ctx, d); c != nil {
					ctx = c
				}
			}
			start := time.Now()
			err := next.ProcessTask(ctx, d)
			if h.OnFinish != nil {
				h.OnFinish(ctx, d, err, time.Since(start))
			}
			return err
		})
	}
}
