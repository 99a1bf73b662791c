package conveyor_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
)

// A worker that serves two queues, handles one task type, and drains on
// SIGTERM.
func ExampleNewWorker() {
	w, err := conveyor.NewWorker("http://127.0.0.1:7420",
		conveyor.WithToken(os.Getenv("CONVEYOR_TOKEN")),
		conveyor.WithQueue("critical", 6),
		conveyor.WithQueue("default", 1),
		conveyor.WithConcurrency(20),
		conveyor.WithDrainGrace(time.Minute),
	)
	if err != nil {
		fmt.Println(err)
		return
	}
	w.HandleFunc("report:build", func(ctx context.Context, d *conveyor.Delivery) error {
		d.Progress(50, "halfway")
		d.SetResult([]byte(`{"rows":42}`))
		return nil
	})
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := w.Run(ctx); err != nil {
		fmt.Println("worker:", err)
	}
}

// A worker of a release: the server sends new work to the newest release
// it has seen, so workers of the next deploy take over as they connect,
// and an operator can drain this one. Without the option, the Worker takes
// the id from CONVEYOR_RELEASE_ID.
func ExampleWithReleaseID() {
	w, err := conveyor.NewWorker("http://127.0.0.1:7420",
		conveyor.WithReleaseID(os.Getenv("GIT_COMMIT")),
	)
	if err != nil {
		fmt.Println(err)
		return
	}
	w.HandleFunc("payment:capture", func(ctx context.Context, d *conveyor.Delivery) error {
		// Enqueued with AtMostOnce, this runs only once the server has
		// authorized its start (d.Options.AtMostOnce is then set).
		return nil
	})
}

// HandleJSON decodes each payload into a typed value; a payload that does
// not decode is archived (SkipRetry) rather than retried.
func ExampleHandleJSON() {
	w, err := conveyor.NewWorker("http://127.0.0.1:7420")
	if err != nil {
		fmt.Println(err)
		return
	}
	type Email struct {
		To      string `json:"to"`
		Subject string `json:"subject"`
	}
	conveyor.HandleJSON(w, "email:send", func(ctx context.Context, d *conveyor.Delivery, e Email) error {
		if e.To == "" {
			return conveyor.SkipRetry(errors.New("no recipient")) // permanent: archive
		}
		return send(ctx, e.To, e.Subject) // an error here is retried with backoff
	})
}

func send(context.Context, string, string) error { return nil }

// Middleware wraps every handler: here the SDK's logging middleware and a
// hooks middleware that counts outcomes.
func ExampleWorker_Use() {
	w, err := conveyor.NewWorker("http://127.0.0.1:7420")
	if err != nil {
		fmt.Println(err)
		return
	}
	var failures int
	w.Use(
		conveyor.LoggingMiddleware(slog.Default()),
		conveyor.HooksMiddleware(conveyor.Hooks{
			OnFinish: func(_ context.Context, d *conveyor.Delivery, err error, elapsed time.Duration) {
				if err != nil {
					failures++ // a real worker would update a metric here
				}
			},
		}),
	)
}
