package conveyorotel

import (
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
)

// scope names this package's tracer.
const scope = "github.com/conveyor-dev/conveyor/sdks/go/conveyorotel"

// Option configures WithTracing, EnqueueHook and Middleware.
type Option func(*config)

type config struct {
	provider   trace.TracerProvider
	propagator propagation.TextMapPropagator
}

// WithTracerProvider sets where spans go. Defaults to the global
// TracerProvider (otel.GetTracerProvider), read when the hook or
// middleware is built.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) {
		if tp != nil {
			c.provider = tp
		}
	}
}

// WithPropagator sets how the span context is written into, and read from,
// a task's metadata. Defaults to W3C Trace Context (traceparent and
// tracestate) rather than the global propagator, which is a no-op until a
// program sets one: tracing then works without that setup. Pass
// otel.GetTextMapPropagator() to use the global one (to carry baggage,
// say).
func WithPropagator(p propagation.TextMapPropagator) Option {
	return func(c *config) {
		if p != nil {
			c.propagator = p
		}
	}
}

func newConfig(opts []Option) *config {
	c := &config{provider: otel.GetTracerProvider(), propagator: propagation.TraceContext{}}
	for _, o := range opts {
		if o != nil {
			o(c)
		}
	}
	return c
}

func (c *config) tracer() trace.Tracer {
	return c.provider.Tracer(scope, trace.WithInstrumentationVersion(conveyor.Version))
}
