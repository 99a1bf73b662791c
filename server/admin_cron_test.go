package server_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/oklog/ulid/v2"
	"google.golang.org/protobuf/types/known/timestamppb"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/gen/conveyor/v1/conveyorv1connect"
	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

func nightly(id string) *conveyorv1.CronEntry {
	return &conveyorv1.CronEntry{Id: id, Spec: "CRON_TZ=Europe/Paris 30 2 * * *", Queue: "reports", Type: "nightly",
		Payload: []byte(`{"full":true}`), Metadata: map[string]string{"team": "billing"},
		Options: &conveyorv1.TaskOptions{Priority: 7, MaxRetry: 3}}
}

// TestCronEntriesCRUD walks an entry through every cron RPC, in every wire
// format, and checks each refusal's code.
func TestCronEntriesCRUD(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	for _, p := range servertest.Protocols {
		t.Run(string(p), func(t *testing.T) {
			ctx := context.Background()
			admin := adminIn(t, s, p)
			id := "nightly-" + string(p)
			created, err := admin.CreateCron(ctx, connect.NewRequest(&conveyorv1.CreateCronRequest{Entry: nightly(id)}))
			if err != nil {
				t.Fatal(err)
			}
			c := created.Msg
			if c.GetId() != id || c.GetContentType() != server.DefaultContentType || c.GetOptions().GetPriority() != 7 ||
				c.GetMetadata()["team"] != "billing" || c.GetPaused() || c.GetLastRunAt() != nil {
				t.Fatalf("CreateCron = %v", c)
			}
			paris, _ := time.LoadLocation("Europe/Paris")
			next := c.GetNextRunAt().AsTime().In(paris)
			if next.Hour() != 2 || next.Minute() != 30 || !next.After(time.Now()) || next.After(time.Now().Add(25*time.Hour)) {
				t.Fatalf("next_run_at = %s, want the next 02:30 in Paris", next)
			}
			_, err = admin.CreateCron(ctx, connect.NewRequest(&conveyorv1.CreateCronRequest{Entry: nightly(id)}))
			requireCode(t, "a second CreateCron with the id", err, connect.CodeAlreadyExists)

			anon, err := admin.CreateCron(ctx, connect.NewRequest(&conveyorv1.CreateCronRequest{Entry: nightly("")}))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := ulid.ParseStrict(anon.Msg.GetId()); err != nil {
				t.Fatalf("an entry created without an id got %q: %v", anon.Msg.GetId(), err)
			}

			up := nightly(id)
			up.Spec, up.Type, up.Metadata = "@every 1h", "hourly", nil
			updated, err := admin.UpdateCron(ctx, connect.NewRequest(&conveyorv1.UpdateCronRequest{Entry: up}))
			if err != nil || updated.Msg.GetSpec() != "@every 1h" || updated.Msg.GetType() != "hourly" || len(updated.Msg.GetMetadata()) != 0 {
				t.Fatalf("UpdateCron = %v, %v", updated, err)
			}
			if d := time.Until(updated.Msg.GetNextRunAt().AsTime()); d < 59*time.Minute || d > time.Hour {
				t.Fatalf("after the update the next run is in %s, want an hour", d)
			}
			got, err := admin.GetCron(ctx, connect.NewRequest(&conveyorv1.GetCronRequest{Id: id}))
			if err != nil || got.Msg.GetType() != "hourly" {
				t.Fatalf("GetCron = %v, %v", got, err)
			}

			paused, err := admin.PauseCron(ctx, connect.NewRequest(&conveyorv1.PauseCronRequest{Id: id}))
			if err != nil || !paused.Msg.GetPaused() || paused.Msg.GetNextRunAt() != nil {
				t.Fatalf("PauseCron = %v, %v", paused, err)
			}
			resumed, err := admin.ResumeCron(ctx, connect.NewRequest(&conveyorv1.ResumeCronRequest{Id: id}))
			if err != nil || resumed.Msg.GetPaused() || resumed.Msg.GetNextRunAt() == nil {
				t.Fatalf("ResumeCron = %v, %v", resumed, err)
			}
			again, err := admin.ResumeCron(ctx, connect.NewRequest(&conveyorv1.ResumeCronRequest{Id: id}))
			if err != nil || !again.Msg.GetNextRunAt().AsTime().Equal(resumed.Msg.GetNextRunAt().AsTime()) {
				t.Fatalf("resuming a running entry changed it: %v, %v", again, err)
			}

			list, err := admin.ListCrons(ctx, connect.NewRequest(&conveyorv1.ListCronsRequest{}))
			if err != nil || !hasCron(list.Msg.GetEntries(), id) || !hasCron(list.Msg.GetEntries(), anon.Msg.GetId()) {
				t.Fatalf("ListCrons = %v, %v", list, err)
			}
			if _, err := admin.DeleteCron(ctx, connect.NewRequest(&conveyorv1.DeleteCronRequest{Id: id})); err != nil {
				t.Fatal(err)
			}
			for what, call := range map[string]func() error{
				"GetCron": func() error {
					_, err := admin.GetCron(ctx, connect.NewRequest(&conveyorv1.GetCronRequest{Id: id}))
					return err
				},
				"DeleteCron": func() error {
					_, err := admin.DeleteCron(ctx, connect.NewRequest(&conveyorv1.DeleteCronRequest{Id: id}))
					return err
				},
				"PauseCron": func() error {
					_, err := admin.PauseCron(ctx, connect.NewRequest(&conveyorv1.PauseCronRequest{Id: id}))
					return err
				},
				"ResumeCron": func() error {
					_, err := admin.ResumeCron(ctx, connect.NewRequest(&conveyorv1.ResumeCronRequest{Id: id}))
					return err
				},
				"UpdateCron": func() error {
					_, err := admin.UpdateCron(ctx, connect.NewRequest(&conveyorv1.UpdateCronRequest{Entry: nightly(id)}))
					return err
				},
			} {
				requireCode(t, what+" of a deleted entry", call(), connect.CodeNotFound)
			}
		})
	}
}

func hasCron(entries []*conveyorv1.CronEntry, id string) bool {
	for _, e := range entries {
		if e.GetId() == id {
			return true
		}
	}
	return false
}

func requireCode(t *testing.T, what string, err error, want connect.Code) {
	t.Helper()
	if connect.CodeOf(err) != want {
		t.Fatalf("%s: %v, want %v", what, err, want)
	}
}

// TestCronRefusesBadEntries checks that each malformed entry is refused
// with invalid_argument and a message naming what is wrong, and stores
// nothing.
func TestCronRefusesBadEntries(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	admin := adminClient(t, s)
	bad := map[string]func(e *conveyorv1.CronEntry){
		"spec":               func(e *conveyorv1.CronEntry) { e.Spec = "every tuesday" },
		"never fires":        func(e *conveyorv1.CronEntry) { e.Spec = "0 0 30 2 *" },
		"bad location":       func(e *conveyorv1.CronEntry) { e.Spec = "CRON_TZ=Mars/Olympus 0 * * * *" },
		"at least 1s":        func(e *conveyorv1.CronEntry) { e.Spec = "@every 10ms" },
		"id":                 func(e *conveyorv1.CronEntry) { e.Id = "has space" },
		"queue":              func(e *conveyorv1.CronEntry) { e.Queue = "-bad" },
		"type is required":   func(e *conveyorv1.CronEntry) { e.Type = "" },
		"options.process_at": func(e *conveyorv1.CronEntry) { e.Options.ProcessAt = timestamppb.Now() },
		"options.deadline":   func(e *conveyorv1.CronEntry) { e.Options.Deadline = timestamppb.Now() },
		"options.priority":   func(e *conveyorv1.CronEntry) { e.Options.Priority = 12 },
		"spec is 2000 bytes": func(e *conveyorv1.CronEntry) { e.Spec = strings.Repeat("*", 2000) },
		"metadata has 65":    func(e *conveyorv1.CronEntry) { e.Metadata = manyKeys(65) },
		"entry is required":  nil,
	}
	for want, mutate := range bad {
		req := &conveyorv1.CreateCronRequest{}
		if mutate != nil {
			req.Entry = nightly("bad")
			mutate(req.Entry)
		}
		_, err := admin.CreateCron(context.Background(), connect.NewRequest(req))
		if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), want) {
			t.Errorf("CreateCron with a bad %s: %v, want invalid_argument saying %q", want, err, want)
		}
	}
	list, err := admin.ListCrons(context.Background(), connect.NewRequest(&conveyorv1.ListCronsRequest{}))
	if err != nil || len(list.Msg.GetEntries()) != 0 {
		t.Fatalf("refused entries were stored: %v, %v", list, err)
	}
	_, err = admin.UpdateCron(context.Background(), connect.NewRequest(&conveyorv1.UpdateCronRequest{Entry: nightly("")}))
	requireCode(t, "UpdateCron without an id", err, connect.CodeInvalidArgument)

	// A call naming no entry misses a required field (invalid_argument),
	// as GetTask's does; not_found is for an id no entry has.
	ctx := context.Background()
	for what, call := range map[string]func() error{
		"GetCron": func() error {
			_, err := admin.GetCron(ctx, connect.NewRequest(&conveyorv1.GetCronRequest{}))
			return err
		},
		"DeleteCron": func() error {
			_, err := admin.DeleteCron(ctx, connect.NewRequest(&conveyorv1.DeleteCronRequest{}))
			return err
		},
		"PauseCron": func() error {
			_, err := admin.PauseCron(ctx, connect.NewRequest(&conveyorv1.PauseCronRequest{}))
			return err
		},
		"ResumeCron": func() error {
			_, err := admin.ResumeCron(ctx, connect.NewRequest(&conveyorv1.ResumeCronRequest{}))
			return err
		},
	} {
		err := call()
		if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "id is required") {
			t.Errorf("%s without an id: %v, want invalid_argument saying id is required", what, err)
		}
	}
}

func manyKeys(n int) map[string]string {
	md := make(map[string]string, n)
	for i := range n {
		md[ulid.Make().String()+string(rune('a'+i%26))] = "v"
	}
	return md
}

// cronFires lists the tasks fired into queue, oldest first, and checks
// each carries its entry's template and the fire's metadata.
func cronFires(t *testing.T, tasks conveyorv1connect.TaskServiceClient, admin conveyorv1connect.AdminServiceClient, queue, entryID string) []time.Time {
	t.Helper()
	page, err := admin.ListTasks(context.Background(), connect.NewRequest(&conveyorv1.ListTasksRequest{Queue: queue, PageSize: 1000}))
	if err != nil {
		t.Fatal(err)
	}
	var fires []time.Time
	for _, brief := range page.Msg.GetTasks() {
		task, err := tasks.GetTask(context.Background(), connect.NewRequest(&conveyorv1.GetTaskRequest{Id: brief.GetId()}))
		if err != nil {
			t.Fatal(err)
		}
		md := task.Msg.GetMetadata()
		at, err := time.Parse(time.RFC3339, md[server.CronFireKey])
		if err != nil || md[server.CronIDKey] != entryID || md["team"] != "billing" || task.Msg.GetType() != "tick" ||
			task.Msg.GetPriority() != 7 || task.Msg.GetMaxRetry() != 3 || string(task.Msg.GetPayload()) != `{"full":true}` {
			t.Fatalf("fired task %v does not carry its entry's template and fire (%v)", task.Msg, err)
		}
		fires = append(fires, at)
	}
	return fires
}

// requireDistinctSeconds checks that no scheduled time was fired twice.
func requireDistinctSeconds(t *testing.T, fires []time.Time) {
	t.Helper()
	seen := map[time.Time]bool{}
	for _, f := range fires {
		if seen[f] || f.Nanosecond() != 0 {
			t.Fatalf("fires %v: %s is fired twice or is not a scheduled second", fires, f)
		}
		seen[f] = true
	}
}

// TestCronFiresEverySecondOnceAcrossRestart runs an @every 1s entry on a
// real clock, restarts the server, and checks that the fired tasks carry
// the template and that no scheduled second was fired twice.
func TestCronFiresEverySecondOnceAcrossRestart(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	entry := nightly("tick")
	entry.Spec, entry.Type, entry.Queue = "@every 1s", "tick", "ticks"
	if _, err := adminClient(t, s).CreateCron(context.Background(), connect.NewRequest(&conveyorv1.CreateCronRequest{Entry: entry})); err != nil {
		t.Fatal(err)
	}
	servertest.Eventually(t, 20*time.Second, "two fires", func() bool { return queueCounts(t, s, "ticks").GetPending() >= 2 })
	s = servertest.Restart(t, s)
	tasks, admin := taskClient(t, s, servertest.GRPC), adminClient(t, s)
	before := len(cronFires(t, tasks, admin, "ticks", "tick"))
	servertest.Eventually(t, 20*time.Second, "two fires after the restart", func() bool {
		return queueCounts(t, s, "ticks").GetPending() >= int64(before+2)
	})
	fires := cronFires(t, tasks, admin, "ticks", "tick")
	requireDistinctSeconds(t, fires)
	got, err := admin.GetCron(context.Background(), connect.NewRequest(&conveyorv1.GetCronRequest{Id: "tick"}))
	if err != nil || got.Msg.GetLastTaskId() == "" || got.Msg.GetLastRunAt() == nil {
		t.Fatalf("after its fires the entry is %v, %v", got, err)
	}
	if last, err := tasks.GetTask(context.Background(), connect.NewRequest(&conveyorv1.GetTaskRequest{Id: got.Msg.GetLastTaskId()})); err != nil ||
		last.Msg.GetMetadata()[server.CronIDKey] != "tick" {
		t.Fatalf("last_task_id names %v, %v", last, err)
	}
}

// TestPausedCronDoesNotFire pauses an @every 1s entry and checks, over the
// seconds it would have fired, that it enqueues nothing; resumed, it fires.
func TestPausedCronDoesNotFire(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	admin := adminClient(t, s)
	entry := nightly("paused")
	entry.Spec, entry.Type, entry.Queue, entry.Paused = "@every 1s", "tick", "paused", true
	if _, err := admin.CreateCron(context.Background(), connect.NewRequest(&conveyorv1.CreateCronRequest{Entry: entry})); err != nil {
		t.Fatal(err)
	}
	// A second entry on a queue of its own is the clock: once it fired
	// three times, the paused one had three seconds to fire.
	clock := nightly("clock")
	clock.Spec, clock.Type, clock.Queue = "@every 1s", "tick", "clock"
	if _, err := admin.CreateCron(context.Background(), connect.NewRequest(&conveyorv1.CreateCronRequest{Entry: clock})); err != nil {
		t.Fatal(err)
	}
	servertest.Eventually(t, 20*time.Second, "three fires of the clock", func() bool { return queueCounts(t, s, "clock").GetPending() >= 3 })
	if n := queueCounts(t, s, "paused").GetPending(); n != 0 {
		t.Fatalf("a paused entry fired %d times", n)
	}
	if _, err := admin.ResumeCron(context.Background(), connect.NewRequest(&conveyorv1.ResumeCronRequest{Id: "paused"})); err != nil {
		t.Fatal(err)
	}
	servertest.Eventually(t, 20*time.Second, "a fire once resumed", func() bool { return queueCounts(t, s, "paused").GetPending() >= 1 })
}
