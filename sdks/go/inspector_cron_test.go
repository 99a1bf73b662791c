package conveyor_test

import (
	"maps"
	"strings"
	"testing"

	"connectrpc.com/connect"

	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
)

// TestInspectorCron: a cron entry created, read, updated field by field
// and whole, paused, resumed, listed and deleted reads back each time as
// the call left it.
func TestInspectorCron(t *testing.T) {
	t.Parallel()
	b := inspSetup(t)
	e, err := b.insp.CreateCron(b.ctx, conveyor.CronEntry{ID: "sync", Spec: "@every 1h", Type: "sync",
		Payload: []byte(`{"full":false}`), Metadata: map[string]string{"team": "data"}, Options: conveyor.TaskOptions{Priority: 7}})
	if err != nil {
		t.Fatalf("CreateCron: %v", err)
	}
	eq(t, "created id", e.ID, "sync")
	eq(t, "created queue (the default)", e.Queue, "default")
	eq(t, "created priority", e.Options.Priority, 7)
	eq(t, "created paused", e.Paused, false)
	if e.NextRunAt.IsZero() || !e.LastRunAt.IsZero() {
		t.Errorf("a new entry's runs: next %v, last %v", e.NextRunAt, e.LastRunAt)
	}
	got, err := b.insp.GetCron(b.ctx, "sync")
	if err != nil || got.Spec != "@every 1h" || string(got.Payload) != `{"full":false}` || !maps.Equal(got.Metadata, e.Metadata) {
		t.Fatalf("GetCron: %v %+v", err, got)
	}

	// One field at a time: the others keep their values.
	if got, err = b.insp.UpdateCron(b.ctx, conveyor.CronEntry{ID: "sync", Spec: "@every 2h"}, conveyor.CronFieldSpec); err != nil {
		t.Fatalf("UpdateCron of the spec: %v", err)
	}
	eq(t, "updated spec", got.Spec, "@every 2h")
	eq(t, "type kept", got.Type, "sync")
	eq(t, "priority kept", got.Options.Priority, 7)
	if !got.NextRunAt.After(e.NextRunAt) {
		t.Errorf("the next run after a longer spec = %v, want after %v", got.NextRunAt, e.NextRunAt)
	}
	next := got.NextRunAt
	if got, err = b.insp.UpdateCron(b.ctx, conveyor.CronEntry{ID: "sync", Options: conveyor.TaskOptions{Priority: 3}},
		conveyor.CronFieldOption("priority")); err != nil {
		t.Fatalf("UpdateCron of one option: %v", err)
	}
	eq(t, "updated priority", got.Options.Priority, 3)
	eq(t, "spec kept", got.Spec, "@every 2h")
	eq(t, "next run kept by a template change", got.NextRunAt, next)

	if got, err = b.insp.PauseCron(b.ctx, "sync"); err != nil || !got.Paused || !got.NextRunAt.IsZero() {
		t.Fatalf("PauseCron: %v %+v", err, got)
	}
	if got, err = b.insp.GetCron(b.ctx, "sync"); err != nil || !got.Paused {
		t.Fatalf("GetCron of the paused entry: %v %+v", err, got)
	}
	if got, err = b.insp.ResumeCron(b.ctx, "sync"); err != nil || got.Paused || got.NextRunAt.IsZero() {
		t.Fatalf("ResumeCron: %v %+v", err, got)
	}

	// A whole replace: Paused is the entry's, and every field not given is cleared.
	if got, err = b.insp.UpdateCron(b.ctx, conveyor.CronEntry{ID: "sync", Spec: "@daily", Type: "sync:full", Paused: true}); err != nil {
		t.Fatalf("UpdateCron of the whole: %v", err)
	}
	eq(t, "replaced type", got.Type, "sync:full")
	eq(t, "replaced pause", got.Paused, true)
	eq(t, "replaced priority (none given)", got.Options.Priority, 0)
	eq(t, "replaced metadata (none given)", len(got.Metadata), 0)

	other, err := b.insp.CreateCron(b.ctx, conveyor.CronEntry{Spec: "0 3 * * *", Type: "report", Queue: "reports", Paused: true})
	if err != nil || other.ID == "" || !other.Paused || !other.NextRunAt.IsZero() {
		t.Fatalf("CreateCron without an id, paused: %v %+v", err, other)
	}
	list, err := b.insp.ListCrons(b.ctx)
	if err != nil {
		t.Fatalf("ListCrons: %v", err)
	}
	ids := map[string]string{}
	for _, e := range list {
		ids[e.ID] = e.Type
	}
	if !maps.Equal(ids, map[string]string{"sync": "sync:full", other.ID: "report"}) {
		t.Errorf("ListCrons = %v", ids)
	}
	// A queue a cron entry enqueues into cannot be deleted, even empty.
	if _, err := b.insp.PauseQueue(b.ctx, "reports"); err != nil {
		t.Fatalf("PauseQueue: %v", err)
	}
	err = b.insp.DeleteQueue(b.ctx, "reports")
	wantCode(t, "DeleteQueue of a cron's queue", err, connect.CodeFailedPrecondition)
	if !strings.Contains(err.Error(), other.ID) {
		t.Errorf("DeleteQueue of a cron's queue: %v, want it to name the entry %s", err, other.ID)
	}

	if err := b.insp.DeleteCron(b.ctx, "sync"); err != nil {
		t.Fatalf("DeleteCron: %v", err)
	}
	_, err = b.insp.GetCron(b.ctx, "sync")
	wantIs(t, "GetCron after DeleteCron", err, conveyor.ErrNotFound)
	wantIs(t, "DeleteCron again", b.insp.DeleteCron(b.ctx, "sync"), conveyor.ErrNotFound)
	if list, err = b.insp.ListCrons(b.ctx); err != nil || len(list) != 1 || list[0].ID != other.ID {
		t.Fatalf("ListCrons after DeleteCron: %v %+v", err, list)
	}
}

// TestInspectorCronErrors: the refusals of the cron calls are the SDK's
// errors.
func TestInspectorCronErrors(t *testing.T) {
	t.Parallel()
	b := inspSetup(t)
	if _, err := b.insp.CreateCron(b.ctx, conveyor.CronEntry{ID: "a", Spec: "@hourly", Type: "t"}); err != nil {
		t.Fatalf("CreateCron: %v", err)
	}
	_, err := b.insp.CreateCron(b.ctx, conveyor.CronEntry{ID: "a", Spec: "@hourly", Type: "t"})
	wantIs(t, "CreateCron of a taken id", err, conveyor.ErrAlreadyExists)
	_, err = b.insp.CreateCron(b.ctx, conveyor.CronEntry{Spec: "every so often", Type: "t"})
	wantIs(t, "CreateCron of a bad spec", err, conveyor.ErrInvalidArgument)
	_, err = b.insp.CreateCron(b.ctx, conveyor.CronEntry{Spec: "@hourly", Type: "t", Options: conveyor.TaskOptions{ProcessIn: -1}})
	wantIs(t, "CreateCron of a negative process_in", err, conveyor.ErrInvalidArgument)
	_, err = b.insp.UpdateCron(b.ctx, conveyor.CronEntry{ID: "a", Paused: true}, conveyor.CronField("paused"))
	wantIs(t, "UpdateCron of the pause by mask", err, conveyor.ErrInvalidArgument)
	_, err = b.insp.UpdateCron(b.ctx, conveyor.CronEntry{ID: "nope", Spec: "@daily"}, conveyor.CronFieldSpec)
	wantIs(t, "UpdateCron of an unknown entry", err, conveyor.ErrNotFound)
	_, err = b.insp.GetCron(b.ctx, "")
	wantIs(t, "GetCron of no id", err, conveyor.ErrInvalidArgument)
	_, err = b.insp.PauseCron(b.ctx, "nope")
	wantIs(t, "PauseCron of an unknown entry", err, conveyor.ErrNotFound)
	_, err = b.insp.ResumeCron(b.ctx, "nope")
	wantIs(t, "ResumeCron of an unknown entry", err, conveyor.ErrNotFound)
}
