// Package conveyorotel traces Conveyor tasks with OpenTelemetry, from the
// producer's Enqueue to the worker's handler, across the server.
//
// On the producer, WithTracing (a Client option) starts a PRODUCER span
// "conveyor.enqueue <type>" for each task sent, as a child of the span in
// the call's context, and injects that span's context into the task's
// metadata with the W3C Trace Context keys (traceparent, tracestate):
//
//	client, err := conveyor.NewClient(addr, conveyorotel.WithTracing())
//
// On the worker, Middleware extracts that context from the delivery's
// metadata and runs the handler inside a CONSUMER span "conveyor.process
// <type>", a child of the producer's span, so that every attempt of a task
// joins the trace that enqueued it:
//
//	worker.Use(conveyorotel.Middleware())
//
// A handler's error, or its panic, marks its span as an error. Both spans carry the
// messaging attributes (messaging.system "conveyor", the queue as
// messaging.destination.name, the task id as messaging.message.id) and the
// task's type; the consumer span also its retry count and outcome.
//
// The spans go to the global TracerProvider (otel.SetTracerProvider)
// unless WithTracerProvider names another. The context travels in W3C
// Trace Context form unless WithPropagator says otherwise; either side's
// propagator must understand the other's keys.
//
// This package is separate from the SDK so that a program that does not
// trace does not depend on OpenTelemetry.
package conveyorotel
