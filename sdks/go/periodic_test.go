package conveyor_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

func (e *wtEnv) cron(id string) *conveyorv1.CronEntry {
	e.t.Helper()
	res, err := e.admin.GetCron(context.Background(), connect.NewRequest(&conveyorv1.GetCronRequest{Id: id}))
	if err != nil {
		e.t.Fatalf("GetCron(%s): %v", id, err)
	}
	return res.Msg
}

// periodicWorker is a worker declaring entry "tick" with payload, that
// signals each run of its task on ran.
func periodicWorker(t *testing.T, e *wtEnv, spec, payload string, ran chan<- string) *conveyor.Worker {
	t.Helper()
	w := e.newWorker(conveyor.WithQueue("p", 1))
	w.HandleFunc("tick", func(_ context.Context, d *conveyor.Delivery) error {
		select {
		case ran <- string(d.Payload):
		default:
		}
		return nil
	})
	if err := w.Periodic("tick", spec, conveyor.NewTask("tick", []byte(payload), conveyor.Queue("p"))); err != nil {
		t.Fatal(err)
	}
	return w
}

// TestPeriodicDeclaredByTwoWorkers: two workers declaring one entry at
// once both start, and the server holds one entry, which fires and runs.
func TestPeriodicDeclaredByTwoWorkers(t *testing.T) {
	t.Parallel()
	e := wtSetup(t, server.Config{})
	ran := make(chan string, 16)
	var wg sync.WaitGroup
	for range 2 {
		w := periodicWorker(t, e, "@every 1s", `{"n":1}`, ran)
		wg.Add(1)
		go func() {
			defer wg.Done()
			wtRun(t, w)
		}()
	}
	wg.Wait()
	if got := wtRecv(t, ran, 30*time.Second, "the periodic task's run"); got != `{"n":1}` {
		t.Fatalf("the periodic task ran with %q", got)
	}
	res, err := e.admin.ListCrons(context.Background(), connect.NewRequest(&conveyorv1.ListCronsRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(res.Msg.GetEntries()); n != 1 {
		t.Fatalf("%d cron entries, want the one both declared", n)
	}
	if c := e.cron("tick"); c.GetSpec() != "@every 1s" || c.GetQueue() != "p" || c.GetType() != "tick" {
		t.Fatalf("the entry is %v", c)
	}
}

// TestPeriodicUpdatesTheTemplate: a worker declaring an existing entry
// with another payload updates it and keeps its schedule; another spec
// replaces the schedule.
func TestPeriodicUpdatesTheTemplate(t *testing.T) {
	t.Parallel()
	e := wtSetup(t, server.Config{})
	first := periodicWorker(t, e, "@every 1h", `{"v":1}`, nil)
	r := wtRun(t, first)
	servertest.Eventually(t, 10*time.Second, "the entry is declared", func() bool {
		_, err := e.admin.GetCron(context.Background(), connect.NewRequest(&conveyorv1.GetCronRequest{Id: "tick"}))
		return err == nil
	})
	next := e.cron("tick").GetNextRunAt().AsTime()
	_ = first.Close()
	if err := r.wait(t, 10*time.Second); err != nil {
		t.Fatalf("Run: %v", err)
	}

	wtRun(t, periodicWorker(t, e, "@every 1h", `{"v":2}`, nil))
	servertest.Eventually(t, 10*time.Second, "the payload updated", func() bool {
		return string(e.cron("tick").GetPayload()) == `{"v":2}`
	})
	if got := e.cron("tick").GetNextRunAt().AsTime(); !got.Equal(next) {
		t.Fatalf("next run moved from %v to %v on a template change", next, got)
	}

	wtRun(t, periodicWorker(t, e, "@every 2h", `{"v":2}`, nil))
	servertest.Eventually(t, 10*time.Second, "the spec updated", func() bool {
		return e.cron("tick").GetSpec() == "@every 2h"
	})
}

// TestPeriodicRefused: an entry the server refuses makes Run return its
// error; bad declarations are refused at once.
func TestPeriodicRefused(t *testing.T) {
	t.Parallel()
	e := wtSetup(t, server.Config{})
	w := periodicWorker(t, e, "not a spec", `{}`, nil)
	err := wtRun(t, w).wait(t, 10*time.Second)
	if !errors.Is(err, conveyor.ErrInvalidArgument) {
		t.Fatalf("Run with a bad spec: %v, want invalid_argument", err)
	}
	w = e.newWorker()
	for name, err := range map[string]error{
		"empty id":   w.Periodic("", "@hourly", conveyor.NewTask("t", nil)),
		"empty spec": w.Periodic("x", "", conveyor.NewTask("t", nil)),
		"nil task":   w.Periodic("x", "@hourly", nil),
	} {
		if err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if err := w.Periodic("x", "@hourly", conveyor.NewTask("t", nil)); err != nil {
		t.Fatal(err)
	}
	if err := w.Periodic("x", "@daily", conveyor.NewTask("t", nil)); err == nil {
		t.Error("a second declaration of x was accepted")
	}
}
