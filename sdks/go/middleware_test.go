package conveyor_test

import (
	"context"
	"errors"
	"testing"

	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
)

// LoggingMiddleware(nil) logs to slog.Default instead of panicking in
// every task (which the worker would report as a failed attempt).
func TestLoggingMiddlewareNilLogger(t *testing.T) {
	boom := errors.New("boom")
	for _, want := range []error{nil, boom} {
		h := conveyor.LoggingMiddleware(nil)(conveyor.HandlerFunc(func(context.Context, *conveyor.Delivery) error { return want }))
		if err := h.ProcessTask(context.Background(), &conveyor.Delivery{ID: "t1", Type: "x"}); !errors.Is(err, want) {
			t.Fatalf("ProcessTask = %v, want %v", err, want)
		}
	}
}
