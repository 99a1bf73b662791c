// Command worker is a runnable example Conveyor worker. It serves the
// "default" queue, handles tasks of type "email:send" whose payload is a
// JSON object such as {"to":"ada@example.com","subject":"Hi","body":"..."},
// logs every task, and drains gracefully on SIGINT or SIGTERM.
//
//	go run ./sdks/go/examples/worker
//
// It connects to $CONVEYOR_ADDR (default http://127.0.0.1:7420) with the
// bearer token in $CONVEYOR_TOKEN, if any. The SDK takes the worker's
// release id from $CONVEYOR_RELEASE_ID (set it to a build id, and new work
// goes to the newest build's workers); it tells the server it handles
// "email:send" only.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
)

// Email is the payload of an "email:send" task.
type Email struct {
	To      string `json:"to"`
	Subject string `json:"subject"`
	Body    string `json:"body"`
}

func main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(log); err != nil {
		log.Error("worker failed", "err", err)
		os.Exit(1)
	}
}

func run(log *slog.Logger) error {
	addr := os.Getenv("CONVEYOR_ADDR")
	if addr == "" {
		addr = "http://127.0.0.1:7420"
	}
	opts := []conveyor.WorkerOption{
		conveyor.WithQueue("default", 1),
		conveyor.WithConcurrency(4),
		conveyor.WithDrainGrace(20 * time.Second),
		conveyor.WithLogger(log),
	}
	if token := os.Getenv("CONVEYOR_TOKEN"); token != "" {
		opts = append(opts, conveyor.WithToken(token))
	}
	w, err := conveyor.NewWorker(addr, opts...)
	if err != nil {
		return err
	}
	w.Use(conveyor.LoggingMiddleware(log))
	conveyor.HandleJSON(w, "email:send", func(ctx context.Context, d *conveyor.Delivery, e Email) error {
		if !strings.Contains(e.To, "@") {
			// Retrying cannot fix a bad address: archive the task.
			return conveyor.SkipRetry(fmt.Errorf("invalid recipient %q", e.To))
		}
		d.Progress(10, "connecting")
		select {
		case <-time.After(200 * time.Millisecond): // stands in for talking to a mail server
		case <-ctx.Done():
			return context.Cause(ctx)
		}
		d.Progress(100, "sent")
		d.SetResult([]byte(`{"status":"sent"}`))
		log.Info("email sent", "task", d.ID, "to", e.To, "subject", e.Subject)
		return nil
	})

	// SIGINT or SIGTERM cancels ctx; Run then drains: no new tasks, running
	// ones get the drain grace to finish, the rest are handed back.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log.Info("worker starting", "addr", addr)
	err = w.Run(ctx)
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	log.Info("worker stopped")
	return err
}
