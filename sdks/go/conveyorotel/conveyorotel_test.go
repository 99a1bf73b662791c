package conveyorotel_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"

	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
	"github.com/conveyor-dev/conveyor/sdks/go/conveyorotel"
	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// env is a real server, a traced Client and a traced Worker, with every
// span recorded in memory.
type env struct {
	t      *testing.T
	url    string
	spans  *tracetest.SpanRecorder
	tp     *sdktrace.TracerProvider
	client *conveyor.Client
	worker *conveyor.Worker
}

func setup(t *testing.T, clientOpts ...conveyor.Option) *env {
	t.Helper()
	s := servertest.Start(t, server.Config{})
	e := &env{t: t, url: s.URL(), spans: tracetest.NewSpanRecorder()}
	e.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(e.spans))
	t.Cleanup(func() { _ = e.tp.Shutdown(context.Background()) })
	var err error
	e.client, err = conveyor.NewClient(s.URL(), append([]conveyor.Option{conveyorotel.WithTracing(conveyorotel.WithTracerProvider(e.tp))}, clientOpts...)...)
	if err != nil {
		t.Fatal(err)
	}
	e.worker, err = conveyor.NewWorker(s.URL(), conveyor.WithLogger(slog.New(slog.DiscardHandler)),
		conveyor.WithReconnectBackoff(20*time.Millisecond, 200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	e.worker.Use(conveyorotel.Middleware(conveyorotel.WithTracerProvider(e.tp)))
	return e
}

// run starts the worker; it is closed at cleanup.
func (e *env) run() {
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = e.worker.Run(context.Background())
	}()
	e.t.Cleanup(func() {
		_ = e.worker.Close()
		<-done
	})
}

// waitSpans waits until n ended spans of kind have been recorded.
func (e *env) waitSpans(kind trace.SpanKind, n int) []sdktrace.ReadOnlySpan {
	e.t.Helper()
	var got []sdktrace.ReadOnlySpan
	servertest.Eventually(e.t, 20*time.Second, "the spans end", func() bool {
		got = got[:0]
		for _, s := range e.spans.Ended() {
			if s.SpanKind() == kind {
				got = append(got, s)
			}
		}
		return len(got) >= n
	})
	return got
}

func attrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		m[kv.Key] = kv.Value
	}
	return m
}

func hasAttrs(t *testing.T, s sdktrace.ReadOnlySpan, want map[string]any) {
	t.Helper()
	got := attrs(s)
	for k, v := range want {
		if g, ok := got[attribute.Key(k)]; !ok || g.AsInterface() != v {
			t.Errorf("span %q: %s = %v, want %v", s.Name(), k, g.AsInterface(), v)
		}
	}
}

// TestTraceEndToEnd: the handler runs in a consumer span that is a child of
// the producer span, itself a child of the caller's span, in one trace,
// and the trace state travels too.
func TestTraceEndToEnd(t *testing.T) {
	t.Parallel()
	e := setup(t)
	spanCtx := make(chan trace.SpanContext, 1)
	e.worker.HandleFunc("email", func(ctx context.Context, _ *conveyor.Delivery) error {
		spanCtx <- trace.SpanContextFromContext(ctx)
		return nil
	})
	e.run()

	// The caller's span continues a remote trace that carries trace state.
	ts, err := trace.ParseTraceState("vendor=opaque")
	if err != nil {
		t.Fatal(err)
	}
	remote := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1, 2, 3}, SpanID: trace.SpanID{4, 5},
		TraceFlags: trace.FlagsSampled, TraceState: ts, Remote: true})
	ctx, caller := e.tp.Tracer("test").Start(trace.ContextWithRemoteSpanContext(context.Background(), remote), "request")
	info, err := e.client.Enqueue(ctx, "email", []byte(`{}`), conveyor.Queue("default"))
	caller.End()
	if err != nil {
		t.Fatal(err)
	}
	if info.Metadata["traceparent"] == "" || info.Metadata["tracestate"] != "vendor=opaque" {
		t.Errorf("task metadata %v, want traceparent and tracestate", info.Metadata)
	}

	var handler trace.SpanContext
	select {
	case handler = <-spanCtx:
	case <-time.After(20 * time.Second):
		t.Fatal("the handler did not run within 20s")
	}
	producer := e.waitSpans(trace.SpanKindProducer, 1)[0]
	consumer := e.waitSpans(trace.SpanKindConsumer, 1)[0]
	if producer.Name() != "conveyor.enqueue email" || consumer.Name() != "conveyor.process email" {
		t.Errorf("span names %q and %q", producer.Name(), consumer.Name())
	}
	if producer.Parent().SpanID() != caller.SpanContext().SpanID() {
		t.Errorf("the producer span's parent is %s, want the caller's span %s", producer.Parent().SpanID(), caller.SpanContext().SpanID())
	}
	if consumer.Parent().SpanID() != producer.SpanContext().SpanID() || !consumer.Parent().IsRemote() {
		t.Errorf("the consumer span's parent is %v, want the producer span %s (remote)", consumer.Parent(), producer.SpanContext().SpanID())
	}
	if handler.TraceID() != remote.TraceID() || handler.SpanID() != consumer.SpanContext().SpanID() {
		t.Errorf("the handler runs in span %s/%s, want %s/%s", handler.TraceID(), handler.SpanID(), remote.TraceID(), consumer.SpanContext().SpanID())
	}
	if handler.TraceState().Get("vendor") != "opaque" {
		t.Errorf("the handler's trace state %q, want vendor=opaque", handler.TraceState())
	}
	hasAttrs(t, producer, map[string]any{"messaging.system": "conveyor", "messaging.destination.name": "default",
		"messaging.message.id": info.ID, "conveyor.task.type": "email", "conveyor.task.state": "pending",
		"messaging.operation.type": "send"})
	hasAttrs(t, consumer, map[string]any{"messaging.system": "conveyor", "messaging.destination.name": "default",
		"messaging.message.id": info.ID, "conveyor.task.type": "email", "conveyor.task.retried": int64(0),
		"conveyor.task.outcome": "success", "messaging.operation.type": "process"})
	if producer.Status().Code != codes.Unset || consumer.Status().Code != codes.Unset {
		t.Errorf("statuses %v and %v, want unset", producer.Status(), consumer.Status())
	}
}

// TestTraceRetries: a failed attempt's span has status error; the retry
// runs in a span of its own under the same producer span.
func TestTraceRetries(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.worker.HandleFunc("flaky", func(_ context.Context, d *conveyor.Delivery) error {
		if d.Retried == 0 {
			return errors.New("upstream down")
		}
		return nil
	})
	e.run()
	info, err := e.client.Enqueue(context.Background(), "flaky", nil,
		conveyor.RetryPolicy(conveyor.RetryStrategyFixed, 10*time.Millisecond, 0))
	if err != nil {
		t.Fatal(err)
	}
	producer := e.waitSpans(trace.SpanKindProducer, 1)[0]
	if producer.Parent().IsValid() {
		t.Errorf("the producer span of an untraced call has parent %v, want a new trace", producer.Parent())
	}
	attempts := e.waitSpans(trace.SpanKindConsumer, 2)
	for i, s := range attempts {
		if s.Parent().SpanID() != producer.SpanContext().SpanID() {
			t.Errorf("attempt %d: parent %s, want the producer span", i, s.Parent().SpanID())
		}
		hasAttrs(t, s, map[string]any{"messaging.message.id": info.ID, "conveyor.task.retried": int64(i)})
	}
	if s := attempts[0]; s.Status().Code != codes.Error || s.Status().Description != "upstream down" || len(s.Events()) == 0 {
		t.Errorf("the failed attempt's status %v with %d events, want error with the recorded error", s.Status(), len(s.Events()))
	}
	hasAttrs(t, attempts[0], map[string]any{"conveyor.task.outcome": "retry"})
	hasAttrs(t, attempts[1], map[string]any{"conveyor.task.outcome": "success"})
}

// TestTraceEnqueueError: an enqueue that fails ends its span with the error.
func TestTraceEnqueueError(t *testing.T) {
	t.Parallel()
	e := setup(t)
	if _, err := e.client.Enqueue(context.Background(), "", nil); !errors.Is(err, conveyor.ErrInvalidArgument) {
		t.Fatalf("Enqueue without a type: %v", err)
	}
	s := e.waitSpans(trace.SpanKindProducer, 1)[0]
	if s.Status().Code != codes.Error {
		t.Errorf("status %v, want error", s.Status())
	}
}

// TestTraceUntracedTask: a task enqueued without tracing is processed in
// a trace of its own.
func TestTraceUntracedTask(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.worker.HandleFunc("plain", func(context.Context, *conveyor.Delivery) error { return nil })
	e.run()
	plain, err := conveyor.NewClient(e.url)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := plain.Enqueue(context.Background(), "plain", nil); err != nil {
		t.Fatal(err)
	}
	if s := e.waitSpans(trace.SpanKindConsumer, 1)[0]; s.Parent().IsValid() {
		t.Errorf("parent %v, want a new trace", s.Parent())
	}
}

// TestTracePanickingHandler: a handler that panics failed its attempt (the
// worker recovers the panic, outside every middleware, and reports RETRY),
// so its span ends with status error, the panic recorded and outcome retry,
// not as a success.
func TestTracePanickingHandler(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.worker.HandleFunc("crashy", func(_ context.Context, d *conveyor.Delivery) error {
		if d.Retried == 0 {
			panic("nil map write")
		}
		return nil
	})
	e.run()
	if _, err := e.client.Enqueue(context.Background(), "crashy", nil,
		conveyor.RetryPolicy(conveyor.RetryStrategyFixed, 10*time.Millisecond, 0)); err != nil {
		t.Fatal(err)
	}
	attempts := e.waitSpans(trace.SpanKindConsumer, 2)
	s := attempts[0]
	if s.Status().Code != codes.Error || !strings.Contains(s.Status().Description, "nil map write") || len(s.Events()) == 0 {
		t.Errorf("the panicking attempt's status %v with %d events, want error naming the panic", s.Status(), len(s.Events()))
	}
	hasAttrs(t, s, map[string]any{"conveyor.task.outcome": "retry", "conveyor.task.retried": int64(0)})
	hasAttrs(t, attempts[1], map[string]any{"conveyor.task.outcome": "success"})
}

// TestTraceOversizedResult: a handler that succeeds with a result past
// MaxResultBytes has its attempt failed by the worker (RETRY), so its span
// says so rather than success.
func TestTraceOversizedResult(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.worker.HandleFunc("big", func(_ context.Context, d *conveyor.Delivery) error {
		if d.Retried == 0 {
			d.SetResult(make([]byte, conveyor.MaxResultBytes+1))
		}
		return nil
	})
	e.run()
	if _, err := e.client.Enqueue(context.Background(), "big", nil,
		conveyor.RetryPolicy(conveyor.RetryStrategyFixed, 10*time.Millisecond, 0)); err != nil {
		t.Fatal(err)
	}
	attempts := e.waitSpans(trace.SpanKindConsumer, 2)
	if s := attempts[0]; s.Status().Code != codes.Error || !strings.Contains(s.Status().Description, "the limit is") {
		t.Errorf("the oversized attempt's status %v, want error naming the limit", s.Status())
	}
	hasAttrs(t, attempts[0], map[string]any{"conveyor.task.outcome": "retry"})
	hasAttrs(t, attempts[1], map[string]any{"conveyor.task.outcome": "success"})
}
