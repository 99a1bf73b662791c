package conveyorotel_test

import (
	"context"
	"log"

	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
	"github.com/conveyor-dev/conveyor/sdks/go/conveyorotel"
)

// A producer and a worker that trace each task from Enqueue to its
// handler, with the global TracerProvider (set it with
// otel.SetTracerProvider).
func Example() {
	client, err := conveyor.NewClient("http://127.0.0.1:7420", conveyorotel.WithTracing())
	if err != nil {
		log.Fatal(err)
	}
	worker, err := conveyor.NewWorker("http://127.0.0.1:7420")
	if err != nil {
		log.Fatal(err)
	}
	worker.Use(conveyorotel.Middleware())
	worker.HandleFunc("email", func(ctx context.Context, d *conveyor.Delivery) error {
		// ctx holds the "conveyor.process email" span, a child of the
		// producer's "conveyor.enqueue email" span.
		return nil
	})

	// ctx would hold the caller's span, such as an HTTP request's.
	ctx := context.Background()
	if _, err := client.Enqueue(ctx, "email", []byte(`{"to":"ada@example.com"}`)); err != nil {
		log.Fatal(err)
	}
}
