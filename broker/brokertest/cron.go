package brokertest

import (
	"errors"
	"reflect"
	"sync"
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
		{name: "StaleTemplateFire", fn: testCronStaleTemplateFire},
		{name: "SkipMissed", fn: testCronSkip},
		{name: "Update", env: testCronUpdate},
		{name: "UpdatesDoNotInterleave", fn: testCronUpdatesDoNotInterleave},
	}
}

func cronEntry(id string) broker.CronEntry {
	return broker.CronEntry{ID: id, Spec: "@every 1m", Queue: "q", Type: "tick", Payload: []byte(`{}`),
		ContentType: "application/json", Metadata: map[string]string{"k": "v"}, Options: []byte{0x08, 0x03}, NextRun: at(time.Minute)}
}

// replaceCron is an update that stores c in place of the stored entry.
func replaceCron(c broker.CronEntry) func(broker.CronEntry) (broker.CronEntry, error) {
	return func(broker.CronEntry) (broker.CronEntry, error) { return c, nil }
}

// pauseCron is an update that pauses an entry, as the server does.
func pauseCron(c broker.CronEntry) (broker.CronEntry, error) {
	c.Paused, c.NextRun = true, time.Time{}
	return c, nil
}

func fire(id string, fireAt, next time.Time) broker.CronFire {
	nt := NewTask("q")
	nt.Type, nt.State = "tick", pending
	nt.Metadata = map[string]string{"conveyor-cron-id": id}
	return broker.CronFire{ID: id, FireAt: fireAt, Next: next, Task: nt, Now: fireAt}
}

func testCronStore(t *testing.T, b broker.Broker) {
	ctx := t.Context()
	c, err := b.CreateCron(ctx, cronEntry("a"))
	if err != nil || c.ID != "a" || c.Spec != "@every 1m" || !c.NextRun.Equal(at(time.Minute)) {
		t.Fatalf("CreateCron = %+v, %v", c, err)
	}
	_, err = b.CreateCron(ctx, cronEntry("a"))
	requireErrIs(t, "creating an entry twice", err, broker.ErrAlreadyExists)
	_, err = b.UpdateCron(ctx, "nope", replaceCron(cronEntry("nope")))
	requireErrIs(t, "updating an entry that does not exist", err, broker.ErrNotFound)
	if _, err := b.FireCron(ctx, fire("a", at(time.Minute), at(2*time.Minute))); err != nil {
		t.Fatal(err)
	}
	up := cronEntry("a")
	up.Spec, up.Type = "@hourly", "other"
	c, err = b.UpdateCron(ctx, "a", replaceCron(up))
	if err != nil || c.Spec != "@hourly" || c.Type != "other" || !c.LastFire.Equal(at(time.Minute)) || c.LastTaskID == "" {
		t.Fatalf("an update replaces the fields and keeps the history: %+v, %v", c, err)
	}
	if _, err := b.CreateCron(ctx, cronEntry("b")); err != nil {
		t.Fatal(err)
	}
	list, err := b.Crons(ctx)
	if err != nil || len(list) != 2 || list[0].ID != "a" || list[1].ID != "b" {
		t.Fatalf("Crons = %+v, %v", list, err)
	}
	c, err = b.UpdateCron(ctx, "b", pauseCron)
	if err != nil || !c.Paused {
		t.Fatalf("pausing: %+v, %v", c, err)
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
	if _, err := b.CreateCron(ctx, cronEntry("a")); err != nil {
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
	if _, err := b.UpdateCron(ctx, "a", pauseCron); err != nil {
		t.Fatal(err)
	}
	_, err = b.FireCron(ctx, fire("a", at(2*time.Minute), at(3*time.Minute)))
	requireErrIs(t, "a fire of a paused entry", err, broker.ErrInvalidState)
	_, err = b.FireCron(ctx, fire("gone", at(2*time.Minute), at(3*time.Minute)))
	requireErrIs(t, "a fire of an unknown entry", err, broker.ErrNotFound)
	RequireCounts(t, b, "q", Counts{pending: 1})
}

func testCronRestart(t *testing.T, e *Env) {
	if _, err := e.B.CreateCron(t.Context(), cronEntry("a")); err != nil {
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
	if _, err := b.CreateCron(ctx, cronEntry("a")); err != nil {
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
	if _, err := b.CreateCron(ctx, cronEntry("a")); err != nil {
		t.Fatal(err)
	}
	up := cronEntry("a")
	up.NextRun = at(time.Hour)
	if _, err := b.UpdateCron(ctx, "a", replaceCron(up)); err != nil {
		t.Fatal(err)
	}
	_, err := b.FireCron(ctx, fire("a", at(time.Minute), at(2*time.Minute)))
	requireErrIs(t, "a fire read before the entry was updated", err, broker.ErrAlreadyFired)
	if _, err := b.FireCron(ctx, fire("a", at(time.Hour), at(2*time.Hour))); err != nil {
		t.Fatalf("the fire the updated entry waits for: %v", err)
	}
	RequireCounts(t, b, "q", Counts{pending: 1})
}

// testCronStaleTemplateFire: an update that changes the task template and
// keeps NextRun refuses a fire built from the entry read before it; the
// fire built from the entry read after it applies.
func testCronStaleTemplateFire(t *testing.T, b broker.Broker) {
	ctx := t.Context()
	read, err := b.CreateCron(ctx, cronEntry("a"))
	if err != nil {
		t.Fatal(err)
	}
	stale := fire("a", at(time.Minute), at(2*time.Minute))
	stale.Entry = &read
	changed, err := b.UpdateCron(ctx, "a", func(c broker.CronEntry) (broker.CronEntry, error) {
		c.Payload = []byte(`{"new":true}`)
		return c, nil
	})
	if err != nil || !changed.NextRun.Equal(read.NextRun) {
		t.Fatalf("UpdateCron = %+v, %v; want the next run kept", changed, err)
	}
	_, err = b.FireCron(ctx, stale)
	requireErrIs(t, "a fire built from the template before an update", err, broker.ErrAlreadyFired)
	fresh := fire("a", at(time.Minute), at(2*time.Minute))
	fresh.Entry = &changed
	if _, err := b.FireCron(ctx, fresh); err != nil {
		t.Fatalf("the fire built from the updated template: %v", err)
	}
	RequireCounts(t, b, "q", Counts{pending: 1})
}

func testCronSkip(t *testing.T, b broker.Broker) {
	ctx := t.Context()
	if _, err := b.CreateCron(ctx, cronEntry("a")); err != nil {
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

// testCronUpdate: UpdateCron hands update a copy of the stored entry and
// stores what it returns, durably, but for the id and the run history,
// which stay the engine's. An update that fails stores nothing, not even
// what it changed in the copy; one of a missing entry is not called.
func testCronUpdate(t *testing.T, e *Env) {
	ctx := t.Context()
	if _, err := e.B.CreateCron(ctx, cronEntry("a")); err != nil {
		t.Fatal(err)
	}
	if _, err := e.B.FireCron(ctx, fire("a", at(time.Minute), at(2*time.Minute))); err != nil {
		t.Fatal(err)
	}
	fired, err := e.B.Cron(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	got, err := e.B.UpdateCron(ctx, "a", func(c broker.CronEntry) (broker.CronEntry, error) {
		requireCron(t, "the entry update is given", c, nil, fired)
		c.Type, c.Metadata["k"], c.NextRun = "other", "changed", at(time.Hour)
		c.ID, c.LastRun, c.LastFire, c.LastTaskID = "b", time.Time{}, time.Time{}, ""
		return c, nil
	})
	want := fired
	want.Payload = cronEntry("a").Payload // not fired's: that one is the engine's memory
	want.Type, want.Metadata, want.NextRun = "other", map[string]string{"k": "changed"}, at(time.Hour)
	requireCron(t, "UpdateCron", got, err, want)

	refused := errors.New("refused")
	_, err = e.B.UpdateCron(ctx, "a", func(c broker.CronEntry) (broker.CronEntry, error) {
		c.Metadata["k"], c.Payload[0], c.Type = "leaked", 'x', "leaked"
		return c, refused
	})
	if err != refused { //nolint:errorlint // the contract: update's error is returned as it is
		t.Fatalf("UpdateCron whose update fails = %v, want update's error as it is", err)
	}
	called := false
	_, err = e.B.UpdateCron(ctx, "nope", func(c broker.CronEntry) (broker.CronEntry, error) {
		called = true
		return c, nil
	})
	requireErrIs(t, "updating an entry that does not exist", err, broker.ErrNotFound)
	if called {
		t.Fatal("UpdateCron called update for an entry that does not exist")
	}
	got, err = e.B.Cron(ctx, "a")
	requireCron(t, "the entry after a failed update", got, err, want)
	got, err = e.Reopen().Cron(ctx, "a")
	requireCron(t, "the entry after a restart", got, err, want)
}

// testCronUpdatesDoNotInterleave races updates that each add a byte to
// the payload: each must read what the one before it wrote, or a byte is
// lost.
func testCronUpdatesDoNotInterleave(t *testing.T, b broker.Broker) {
	ctx := t.Context()
	c := cronEntry("a")
	c.Payload = nil
	if _, err := b.CreateCron(ctx, c); err != nil {
		t.Fatal(err)
	}
	const writers, rounds = 4, 10
	errs := make(chan error, writers)
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for range rounds {
				_, err := b.UpdateCron(ctx, "a", func(c broker.CronEntry) (broker.CronEntry, error) {
					c.Payload = append(c.Payload, '.')
					return c, nil
				})
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got, err := b.Cron(ctx, "a"); err != nil || len(got.Payload) != writers*rounds {
		t.Fatalf("after %d updates adding a byte each the payload is %q (%v)", writers*rounds, got.Payload, err)
	}
}

// requireCron checks that got is want, its times compared as instants.
func requireCron(t *testing.T, what string, got broker.CronEntry, err error, want broker.CronEntry) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	sameTimes := got.NextRun.Equal(want.NextRun) && got.LastRun.Equal(want.LastRun) && got.LastFire.Equal(want.LastFire)
	got.NextRun, got.LastRun, got.LastFire = want.NextRun, want.LastRun, want.LastFire
	if !sameTimes || !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: got %+v, want %+v", what, got, want)
	}
}
