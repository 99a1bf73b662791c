package conveyor_test

import (
	"context"
	"fmt"

	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
)

// A periodic job declared beside its handler: Run creates the cron entry
// "nightly-report" (or brings an existing one in step with this code)
// before the session opens. Every replica may declare it; it fires once a
// night.
func ExampleWorker_Periodic() {
	w, err := conveyor.NewWorker("http://127.0.0.1:7420", conveyor.WithQueue("reports", 1))
	if err != nil {
		fmt.Println(err)
		return
	}
	w.HandleFunc("report:build", func(ctx context.Context, d *conveyor.Delivery) error {
		return nil // build the report named in d.Payload
	})
	task := conveyor.NewTask("report:build", []byte(`{"report":"daily"}`), conveyor.Queue("reports"))
	if err := w.Periodic("nightly-report", "CRON_TZ=Europe/Paris 0 3 * * *", task); err != nil {
		fmt.Println(err)
		return
	}
	_ = w.Run(context.Background())
}
