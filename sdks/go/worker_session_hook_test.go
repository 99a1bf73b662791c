// WithSessionHook: the hook sees every session's id, once per Welcome.

package conveyor_test

import (
	"context"
	"testing"
	"time"

	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

func TestWorkerSessionHookSeesEachWelcome(t *testing.T) {
	t.Parallel()
	e := wtSetup(t, server.Config{})
	ids := make(chan string, 4)
	w := e.newWorker(conveyor.WithQueue("sh", 1), conveyor.WithSessionHook(func(id string) { ids <- id }))
	w.HandleFunc("t", func(context.Context, *conveyor.Delivery) error { return nil })
	wtRun(t, w)

	first := wtRecv(t, ids, 10*time.Second, "the first session's id")
	if live := e.waitSession(""); live.GetSessionId() != first {
		t.Fatalf("hook got session %q, the server lists %q", first, live.GetSessionId())
	}
	e.srv = servertest.Restart(t, e.srv)
	e.connect()
	second := wtRecv(t, ids, 30*time.Second, "the session's id after a restart")
	if second == "" || second == first {
		t.Fatalf("hook after the restart got %q, want a new id (the first was %q)", second, first)
	}
	if live := e.waitSession(""); live.GetSessionId() != second {
		t.Fatalf("hook got session %q, the server lists %q", second, live.GetSessionId())
	}
}
