package conveyor_test

import (
	"context"
	"fmt"
	"net/http"
	"os"

	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
)

// A push endpoint on a serverless platform (Cloud Run style): the server
// POSTs each task of the queue whose push.url names this service, signed
// with the secret it shares with it (CONVEYOR_PUSH_SECRET, whsec_...).
// The handlers are those a session worker would register.
func ExampleWorker_PushHandler() {
	w, err := conveyor.NewPushWorker() // no server address: push only
	if err != nil {
		fmt.Println(err)
		return
	}
	type email struct{ To, Subject string }
	conveyor.HandleJSON(w, "email:send", func(ctx context.Context, d *conveyor.Delivery, e email) error {
		// send it; ctx ends at the PushRequest's deadline
		return nil
	})
	h, err := w.PushHandler() // the secrets come from CONVEYOR_PUSH_SECRET
	if err != nil {
		fmt.Println(err) // no secret: it refuses to serve unsigned requests
		return
	}
	if err := http.ListenAndServe(":"+os.Getenv("PORT"), h); err != nil {
		fmt.Println(err)
	}
}
