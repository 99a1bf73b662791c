package brokertest

import (
	"testing"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
)

func cronCases() []testCase {
	return []testCase{
		{name: "Store", fn: testCronStore},
		{name: "Fire", fn: testCronFire},
		{name: "FireOnceAcrossRestart", env: testCronRestart},
		{name: "FireRefusedTask", fn: testCronRefusedTask},
		{name: "StaleFire", fn: testCronStaleFire},
		{name: "SkipMissed", fn: testCronSkip},
	}
}

func cronEntry(id string) broker.CronEntry {
	return broker.CronEntry{ID: id, Spec: "@every 1m", Queue: "q", Type: "tick", Payload: []byte(`{}`),
		ContentType: "application/json", Metadata: map[string]string{"k": "v"}, Options: []byte{0x08, 0x03}, NextRun: at(time.Minute)}
}

func fire(id string, fireAt, next time.Time) broker.CronFire {
	nt := NewTask("q")
	nt.Type, nt.State = "tick", pending
	nt.Metadata = map[string]string{"conveyor-cron-id": id}
	return broker.CronFire{ID: id, FireAt: fireAt, Next: next, Task: nt, Now: fireAt}
}

func testCronStore(t *testing.T, b broker.Broker) {
	ctx := t.Context()
	c, err := b.PutCron(ctx, cronEntry("a"), true)
	if err != nil || c.ID != "a" || c.Spec != "@every 1m" || !c.NextRun.Equal(at(time.Minute)) {
		t.Fatalf("PutCron = %+v, %v", c, err)
	}
	_, err = b.PutCron(ctx, cronEntry("a"), true)
	requireErrIs(t, "creating an entry twice", err, broker.ErrAlreadyExists)
	_, err = b.PutCron(ctx, cronEntry("nope"), false)
	requireErrIs(t, "updating an entry that does not exist", err, broker.ErrNotFound)
	if _, err := b.FireCron(ctx, fire("a", at(time.Minute), at(2*time.Minute))); err != nil {
		t.Fatal(err)
	}
	up := cronEntry("a")
	up.Spec, up.Type = "@hourly", "other"
	c, err = b.PutCron(ctx, up, false)
	if err != nil || c.Spec != "@hourly" || c.Type != "other" || !c.LastFire.Equal(at(time.Minute)) || c.LastTaskID == "" {
		t.Fatalf("an update replaces the fields and keeps the history: %+v, %v", c, err)
	}
	if _, err := b.PutCron(ctx, cronEntry("b"), true); err != nil {
		t.Fatal(err)
	}
	list, err := b.Crons(ctx)
	if err != nil || len(list) != 2 || list[0].ID != "a" || list[1].ID != "b" {
		t.Fatalf("Crons = %+v, %v", list, err)
	}
	c, err = b.SetCronPaused(ctx, "b", true, time.Time{})
	if err != nil || !c.Paused {
		t.Fatalf("SetCronPaused = %+v, %v", c, err)
	}
	if err := b.DeleteCron(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	_, err = b.Cron(ctx, "b")
	requireErrIs(t, "Cron of a deleted entry", err, broker.ErrNotFound)
	requireErrIs(t, "deleting twice", b.DeleteCron(ctx, "b"), broker.ErrNotFound)
}

func testCronFire(t *testing.T, b broker.Broker) {
	ctx := t.Context()
	if _, err := b.PutCron(ctx, cronEntry("a"), true); err != nil {
		t.Fatal(err)
	}
	task, err := b.FireCron(ctx, fire("a", at(time.Minute), at(2*time.Minute)))
	if err != nil || task == nil || task.Type != "tick" {
		t.Fatalf("FireCron = %+v, %v", task, err)
	}
	RequireState(t, b, task.ID, pending)
	c, _ := b.Cron(ctx, "a")
	if !c.LastFire.Equal(at(time.Minute)) || c.LastTaskID != task.ID || !c.NextRun.Equal(at(2*time.Minute)) {
		t.Fatalf("after a fire the entry is %+v", c)
	}
	for _, when := range []time.Time{at(time.Minute), at(30 * time.Second)} {
		_, err := b.FireCron(ctx, fire("a", when, at(2*time.Minute)))
		requireErrIs(t, "a fire not after the last", err, broker.ErrAlreadyFired)
	}
	if _, err := b.SetCronPaused(ctx, "a", true, time.Time{}); err != nil {
		t.Fatal(err)
	}
	_, err = b.FireCron(ctx, fire("a", at(2*time.Minute), at(3*time.Minute)))
	requireErrIs(t, "a fire of a paused entry", err, broker.ErrInvalidState)
	_, err = b.FireCron(ctx, fire("gone", at(2*time.Minute), at(3*time.Minute)))
	requireErrIs(t, "a fire of an unknown entry", err, broker.ErrNotFound)
	RequireCounts(t, b, "q", Counts{pending: 1})
}

func testCronRestart(t *testing.T, e *Env) {
	if _, err := e.B.PutCron(t.Context(), cronEntry("a"), true); err != nil {
		t.Fatal(err)
	}
	if _, err := e.B.FireCron(t.Context(), fire("a", at(time.Minute), at(2*time.Minute))); err != nil {
		t.Fatal(err)
	}
	b := e.Reopen()
	c, err := b.Cron(t.Context(), "a")
	if err != nil || c.Spec != "@every 1m" || !c.LastFire.Equal(at(time.Minute)) || string(c.Options) != string(cronEntry("a").Options) {
		t.Fatalf("entry after a restart = %+v, %v", c, err)
	}
	_, err = b.FireCron(t.Context(), fire("a", at(time.Minute), at(2*time.Minute)))
	requireErrIs(t, "the same fire after a restart", err, broker.ErrAlreadyFired)
	RequireCounts(t, b, "q", Counts{pending: 1})
}

func testCronRefusedTask(t *testing.T, b broker.Broker) {
	ctx := t.Context()
	if _, err := b.PutCron(ctx, cronEntry("a"), true); err != nil {
		t.Fatal(err)
	}
	held := NewTask("q")
	held.UniqueKey = "once"
	EnqueueOne(t, b, T0, held)
	f := fire("a", at(time.Minute), at(2*time.Minute))
	f.Task.UniqueKey = "once"
	_, err := b.FireCron(ctx, f)
	requireErrIs(t, "a fire whose task is refused", err, broker.ErrAlreadyExists)
	if c, _ := b.Cron(ctx, "a"); !c.LastFire.Equal(at(time.Minute)) {
		t.Fatalf("the refused fire is not recorded: %+v", c)
	}
}

func testCronStaleFire(t *testing.T, b broker.Broker) {
	ctx := t.Context()
	if _, err := b.PutCron(ctx, cronEntry("a"), true); err != nil {
		t.Fatal(err)
	}
	up := cronEntry("a")
	up.NextRun = at(time.Hour)
	if _, err := b.PutCron(ctx, up, false); err != nil {
		t.Fatal(err)
	}
	_, err := b.FireCron(ctx, fire("a", at(time.Minute), at(2*time.Minute)))
	requireErrIs(t, "a fire read before the entry was updated", err, broker.ErrAlreadyFired)
	if _, err := b.FireCron(ctx, fire("a", at(time.Hour), at(2*time.Hour))); err != nil {
		t.Fatalf("the fire the updated entry waits for: %v", err)
	}
	RequireCounts(t, b, "q", Counts{pending: 1})
}

func testCronSkip(t *testing.T, b broker.Broker) {
	ctx := t.Context()
	if _, err := b.PutCron(ctx, cronEntry("a"), true); err != nil {
		t.Fatal(err)
	}
	f := fire("a", at(time.Minute), at(2*time.Minute))
	f.Skip = true
	if task, err := b.FireCron(ctx, f); err != nil || task != nil {
		t.Fatalf("a skipped fire = %+v, %v", task, err)
	}
	c, _ := b.Cron(ctx, "a")
	if !c.NextRun.Equal(at(2*time.Minute)) || !c.LastFire.Equal(at(time.Minute)) || !c.LastRun.IsZero() || c.LastTaskID != "" {
		t.Fatalf("after a skip the entry is %+v", c)
	}
	_, err := b.FireCron(ctx, fire("a", at(time.Minute), at(2*time.Minute)))
	requireErrIs(t, "firing a skipped time", err, broker.ErrAlreadyFired)
	RequireCounts(t, b, "q", Counts{})
}
