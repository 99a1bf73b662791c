package server_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/gen/conveyor/v1/conveyorv1connect"
	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

// cronEditor changes one cron entry through UpdateCron with a mask.
type cronEditor struct {
	t     *testing.T
	admin conveyorv1connect.AdminServiceClient
	id    string
}

// newCronEditor creates entry on s and returns an editor of it, with the
// entry as created.
func newCronEditor(t *testing.T, admin conveyorv1connect.AdminServiceClient, entry *conveyorv1.CronEntry) (*cronEditor, *conveyorv1.CronEntry) {
	t.Helper()
	res, err := admin.CreateCron(context.Background(), connect.NewRequest(&conveyorv1.CreateCronRequest{Entry: entry}))
	if err != nil {
		t.Fatal(err)
	}
	return &cronEditor{t: t, admin: admin, id: res.Msg.GetId()}, res.Msg
}

// update sends e, with the editor's id, and a mask of paths.
func (c *cronEditor) update(e *conveyorv1.CronEntry, paths ...string) (*conveyorv1.CronEntry, error) {
	e = proto.CloneOf(e)
	e.Id = c.id
	res, err := c.admin.UpdateCron(context.Background(), connect.NewRequest(&conveyorv1.UpdateCronRequest{
		Entry: e, UpdateMask: &fieldmaskpb.FieldMask{Paths: paths}}))
	if err != nil {
		return nil, err
	}
	return res.Msg, nil
}

// stored is the entry as the server has it.
func (c *cronEditor) stored() *conveyorv1.CronEntry {
	c.t.Helper()
	res, err := c.admin.GetCron(context.Background(), connect.NewRequest(&conveyorv1.GetCronRequest{Id: c.id}))
	if err != nil {
		c.t.Fatal(err)
	}
	return res.Msg
}

func requireEntry(t *testing.T, what string, got *conveyorv1.CronEntry, err error, want *conveyorv1.CronEntry) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if !proto.Equal(got, want) {
		t.Fatalf("%s:\n got %v\nwant %v", what, got, want)
	}
}

// TestCronUpdateMask: an update that names its fields changes those and
// keeps every other, next_run_at included, in every wire format (JSON
// spells a mask as one string of camelCase paths).
func TestCronUpdateMask(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	for _, p := range servertest.Protocols {
		t.Run(string(p), func(t *testing.T) {
			c, want := newCronEditor(t, adminIn(t, s, p), nightly("mask-"+string(p)))
			got, err := c.update(&conveyorv1.CronEntry{Type: "weekly", ContentType: "text/plain",
				Options: &conveyorv1.TaskOptions{Priority: 2, MaxRetry: 99}}, "type", "content_type", "options.priority")
			want.Type, want.ContentType, want.Options.Priority = "weekly", "text/plain", 2
			requireEntry(t, "after changing type, content_type and options.priority", got, err, want)

			got, err = c.update(&conveyorv1.CronEntry{Metadata: map[string]string{"team": "ops"},
				Options: &conveyorv1.TaskOptions{UniqueKey: "one"}}, "metadata", "options")
			want.Metadata, want.Options = map[string]string{"team": "ops"}, &conveyorv1.TaskOptions{UniqueKey: "one"}
			requireEntry(t, "after replacing metadata and options whole", got, err, want)
			requireEntry(t, "GetCron after the updates", c.stored(), nil, want)
		})
	}
}

// TestCronUpdateMaskKeepsOthersChanges is the lost update an editor that
// reads, changes and writes a whole entry makes: a change built from a
// stale read, masked, keeps what changed since; and two clients changing
// one field each, at once, both keep their change.
func TestCronUpdateMaskKeepsOthersChanges(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	c, want := newCronEditor(t, adminClient(t, s), nightly("n"))
	stale := c.stored()
	got, err := c.update(&conveyorv1.CronEntry{Payload: []byte(`{"full":false}`)}, "payload")
	want.Payload = []byte(`{"full":false}`)
	requireEntry(t, "after changing the payload", got, err, want)
	stale.Queue = "elsewhere"
	got, err = c.update(stale, "queue")
	want.Queue = "elsewhere"
	requireEntry(t, "after changing the queue from a read older than the payload's change", got, err, want)

	const rounds = 25
	errs := make(chan error, 2)
	for _, path := range []string{"payload", "type"} {
		go func() {
			var err error
			for i := 1; i <= rounds && err == nil; i++ {
				n := string(rune('a' + i))
				_, err = c.update(&conveyorv1.CronEntry{Spec: "@hourly", Type: path + n, Payload: []byte(path + n)}, path)
			}
			errs <- err
		}()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	last := string(rune('a' + rounds))
	want.Payload, want.Type = []byte("payload"+last), "type"+last
	requireEntry(t, "after two clients changed one field each", c.stored(), nil, want)
}

// TestCronUpdateMaskNextRun: the next run is counted from now when the
// mask names spec, and kept when it does not, also once the clock has
// moved past the second the entry was scheduled in; a paused entry stays
// paused.
func TestCronUpdateMaskNextRun(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	hourly := nightly("h")
	hourly.Spec = "@every 1h"
	c, want := newCronEditor(t, adminClient(t, s), hourly)
	// "@every 1h" fires an hour after the whole second it is counted from:
	// once a second has passed, counting again gives another time.
	first := want.GetNextRunAt().AsTime()
	servertest.Eventually(t, 5*time.Second, "the clock passes the entry's second", func() bool {
		return time.Now().Add(time.Hour).Truncate(time.Second).After(first)
	})
	got, err := c.update(&conveyorv1.CronEntry{Payload: []byte("p")}, "payload")
	want.Payload = []byte("p")
	requireEntry(t, "after a change that leaves spec", got, err, want)

	got, err = c.update(&conveyorv1.CronEntry{Spec: "@every 1h"}, "spec")
	if err != nil || !got.GetNextRunAt().AsTime().After(first) || time.Until(got.GetNextRunAt().AsTime()) > time.Hour {
		t.Fatalf("after naming spec: %v, %v; want the next run an hour from now, after %s", got, err, first)
	}

	if _, err := c.admin.PauseCron(context.Background(), connect.NewRequest(&conveyorv1.PauseCronRequest{Id: c.id})); err != nil {
		t.Fatal(err)
	}
	for _, paths := range [][]string{{"type"}, {"spec", "type"}} {
		got, err = c.update(&conveyorv1.CronEntry{Spec: "@every 2h", Type: "while-paused"}, paths...)
		if err != nil || !got.GetPaused() || got.GetNextRunAt() != nil || got.GetType() != "while-paused" {
			t.Fatalf("a paused entry after a change of %v: %v, %v; want it paused", paths, got, err)
		}
	}
}

// TestCronUpdateMaskRefusals: a path that names no field an update can set,
// and a change that makes the entry invalid, are invalid_argument naming
// what is wrong, and store nothing; a missing entry is not_found.
func TestCronUpdateMaskRefusals(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	c, want := newCronEditor(t, adminClient(t, s), nightly("n"))
	for _, path := range []string{"id", "paused", "next_run_at", "last_run_at", "last_task_id",
		"priority", "options.nope", "options.retry_policy.max_attempts", "metadata.team", "Type", ""} {
		_, err := c.update(&conveyorv1.CronEntry{Type: "t"}, "type", path)
		msg := `update_mask.paths[1]: "` + path + `" is not a field`
		if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), msg) ||
			!strings.Contains(err.Error(), "options.priority, options.process_at") || !strings.Contains(err.Error(), "spec, type") {
			t.Errorf("a mask naming %q: %v; want invalid_argument saying %q and listing the fields", path, err, msg)
		}
	}

	fixedTime := &conveyorv1.TaskOptions{Deadline: timestamppb.Now()}
	bad := []struct {
		path  string
		entry *conveyorv1.CronEntry
		want  string
	}{
		{"type", &conveyorv1.CronEntry{}, "type is required"},
		{"spec", &conveyorv1.CronEntry{Spec: "every tuesday"}, "entry.spec"},
		{"queue", &conveyorv1.CronEntry{Queue: "-bad"}, "queue"},
		{"options.deadline", &conveyorv1.CronEntry{Options: fixedTime}, "options.deadline is a fixed time"},
		{"options", &conveyorv1.CronEntry{Options: fixedTime}, "options.deadline is a fixed time"},
		{"options.priority", &conveyorv1.CronEntry{Options: &conveyorv1.TaskOptions{Priority: 12}}, "options.priority"},
		{"metadata", &conveyorv1.CronEntry{Metadata: manyKeys(65)}, "metadata has 65"},
	}
	for _, b := range bad {
		_, err := c.update(b.entry, b.path)
		if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), b.want) {
			t.Errorf("a bad %s: %v; want invalid_argument saying %q", b.path, err, b.want)
		}
	}
	requireEntry(t, "the entry after the refused updates", c.stored(), nil, want)

	c.id = "missing"
	_, err := c.update(&conveyorv1.CronEntry{Type: "t"}, "type")
	requireCode(t, "a masked update of a missing entry", err, connect.CodeNotFound)
}
