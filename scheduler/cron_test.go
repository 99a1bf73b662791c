package scheduler_test

import (
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
	"github.com/conveyor-dev/conveyor/broker/bolt"
	"github.com/conveyor-dev/conveyor/broker/brokertest"
	"github.com/conveyor-dev/conveyor/scheduler"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// t0 is a Monday, 09:00:00 UTC.
var t0 = time.Date(2026, 6, 1, 9, 0, 0, 0, time.UTC)

func TestParseCronSpec(t *testing.T) {
	t.Parallel()
	good := map[string]time.Time{
		"*/15 * * * *":                        t0.Add(15 * time.Minute),
		"30 */10 * * * *":                     t0.Add(30 * time.Second),
		"@hourly":                             t0.Add(time.Hour),
		"@daily":                              time.Date(2026, 6, 2, 0, 0, 0, 0, time.UTC),
		"@every 1m30s":                        t0.Add(90 * time.Second),
		"0 12 * * MON":                        t0.Add(3 * time.Hour),
		"CRON_TZ=Asia/Tokyo 0 9 * * *":        time.Date(2026, 6, 2, 0, 0, 0, 0, time.UTC),  // 09:00 in Tokyo
		"CRON_TZ=America/New_York 0 6 1 6 *":  time.Date(2026, 6, 1, 10, 0, 0, 0, time.UTC), // EDT
		"CRON_TZ=America/New_York 0 6 1 1 *":  time.Date(2027, 1, 1, 11, 0, 0, 0, time.UTC), // EST
		"CRON_TZ=America/New_York 30 5 1 6 *": t0.Add(30 * time.Minute),
	}
	for spec, want := range good {
		s, err := scheduler.ParseCronSpec(spec, t0)
		if err != nil {
			t.Errorf("ParseCronSpec(%q): %v", spec, err)
			continue
		}
		if got := s.Next(t0); !got.Equal(want) {
			t.Errorf("ParseCronSpec(%q).Next(t0) = %s, want %s", spec, got, want)
		}
	}
	bad := map[string]string{
		"":                               "empty",
		"61 * * * *":                     "above max",
		"* * * *":                        "expected 5 to 6 fields",
		"* * * * * * *":                  "expected 5 to 6 fields",
		"@fortnightly":                   "unrecognized descriptor",
		"@every -1s":                     "at least 1s",
		"@every 0s":                      "at least 1s",
		"@every 1500ms":                  "whole seconds",
		"@every soon":                    "does not parse",
		"TZ=UTC @every 0s":               "at least 1s",
		"CRON_TZ=":                       "no schedule", // panicked the parser
		"0 0 30 2 *":                     "never fires",
		"CRON_TZ=Nowhere/City * * * * *": "provided bad location",
	}
	for spec, want := range bad {
		_, err := scheduler.ParseCronSpec(spec, t0)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "spec") {
			t.Errorf("ParseCronSpec(%q) = %v, want an error naming the spec and saying %q", spec, err, want)
		}
	}
}

// TestCronSpecDaylightSaving pins what docs/workflows.md says of the days
// a zone's clock changes: a skipped local time does not fire that day, a
// repeated one fires twice.
func TestCronSpecDaylightSaving(t *testing.T) {
	t.Parallel()
	fires := func(spec string, from time.Time, n int) []string {
		s, err := scheduler.ParseCronSpec(spec, from)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for at := from; len(out) < n; {
			at = s.Next(at)
			out = append(out, at.UTC().Format(time.RFC3339))
		}
		return out
	}
	spring := fires("CRON_TZ=America/New_York 30 2 * * *", time.Date(2026, 3, 7, 12, 0, 0, 0, time.UTC), 1)
	if want := "2026-03-09T06:30:00Z"; spring[0] != want { // none on the 8th
		t.Errorf("02:30 across the spring change fires first at %s, want %s", spring[0], want)
	}
	fall := fires("CRON_TZ=America/New_York 30 1 * * *", time.Date(2026, 10, 31, 12, 0, 0, 0, time.UTC), 3)
	if want := "2026-11-01T05:30:00Z 2026-11-01T06:30:00Z 2026-11-02T06:30:00Z"; strings.Join(fall, " ") != want {
		t.Errorf("01:30 across the fall change fires at %v, want %s", fall, want)
	}
}

// cronEnv is a real engine with one entry and a scheduler on it.
type cronEnv struct {
	t    *testing.T
	b    broker.Broker
	cron *scheduler.Cron
}

func newCronEnv(t *testing.T) *cronEnv {
	t.Helper()
	b, err := bolt.Open(bolt.Config{Path: filepath.Join(t.TempDir(), "conveyor.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return &cronEnv{t: t, b: b, cron: scheduler.NewCron(b, build, nil, quiet)}
}

// build is what the server does for a fire: the entry's task, with the
// fire named in its metadata.
func build(e broker.CronEntry, fireAt time.Time) (broker.NewTask, error) {
	nt := brokertest.NewTask(e.Queue)
	nt.Type, nt.State = e.Type, broker.StatePending
	nt.Metadata = map[string]string{"conveyor-cron-id": e.ID, "conveyor-cron-fire": fireAt.UTC().Format(time.RFC3339)}
	return nt, nil
}

func (c *cronEnv) put(id, spec string, now time.Time) broker.CronEntry {
	c.t.Helper()
	s, err := scheduler.ParseCronSpec(spec, now)
	if err != nil {
		c.t.Fatal(err)
	}
	e, err := c.b.CreateCron(c.t.Context(), broker.CronEntry{ID: id, Spec: spec, Queue: "q", Type: id, NextRun: s.Next(now)})
	if err != nil {
		c.t.Fatal(err)
	}
	return e
}

// update changes entry id as an operator would, by change.
func (c *cronEnv) update(id string, change func(*broker.CronEntry)) (broker.CronEntry, error) {
	return c.b.UpdateCron(c.t.Context(), id, func(e broker.CronEntry) (broker.CronEntry, error) {
		change(&e)
		return e, nil
	})
}

func (c *cronEnv) round(s *scheduler.Cron, now time.Time) time.Time {
	c.t.Helper()
	next, err := s.Round(c.t.Context(), now)
	if err != nil {
		c.t.Fatalf("Round(%s): %v", now, err)
	}
	return next
}

// fires lists the scheduled times of the tasks fired so far, in order.
func (c *cronEnv) fires() []string {
	c.t.Helper()
	page, err := c.b.ListTasks(c.t.Context(), broker.ListParams{Queue: "q", State: broker.StatePending, Limit: 1000})
	if err != nil {
		c.t.Fatal(err)
	}
	var out []string
	for _, task := range page.Tasks {
		full := brokertest.GetTask(c.t, c.b, task.ID)
		out = append(out, full.Type+"@"+full.Metadata["conveyor-cron-fire"])
	}
	return out
}

func (c *cronEnv) requireFires(want ...string) {
	c.t.Helper()
	if got := c.fires(); strings.Join(got, " ") != strings.Join(want, " ") {
		c.t.Fatalf("fired %v, want %v", got, want)
	}
}

// TestCronFiresEachScheduledTimeOnce walks a clock past an entry's fires:
// each is enqueued once, at its time, and a round answers the next one.
func TestCronFiresEachScheduledTimeOnce(t *testing.T) {
	t.Parallel()
	c := newCronEnv(t)
	c.put("every5m", "*/5 * * * *", t0)
	if next := c.round(c.cron, t0); !next.Equal(t0.Add(5 * time.Minute)) {
		t.Fatalf("first round answers %s, want the first fire", next)
	}
	c.requireFires()
	if next := c.round(c.cron, t0.Add(5*time.Minute)); !next.Equal(t0.Add(10 * time.Minute)) {
		t.Fatalf("the round that fires answers %s, want the following fire", next)
	}
	c.round(c.cron, t0.Add(5*time.Minute+time.Second))
	c.requireFires("every5m@2026-06-01T09:05:00Z")
	e, err := c.b.Cron(t.Context(), "every5m")
	if err != nil || !e.NextRun.Equal(t0.Add(10*time.Minute)) || !e.LastRun.Equal(t0.Add(5*time.Minute)) || e.LastTaskID == "" {
		t.Fatalf("entry after the fire: %+v, %v", e, err)
	}
	// A round that comes 12 minutes late applies the fire it waited for
	// and skips the one it overran (09:15), rather than firing twice.
	c.round(c.cron, t0.Add(22*time.Minute))
	c.round(c.cron, t0.Add(24*time.Minute))
	c.requireFires("every5m@2026-06-01T09:05:00Z", "every5m@2026-06-01T09:10:00Z")
	c.round(c.cron, t0.Add(25*time.Minute))
	c.requireFires("every5m@2026-06-01T09:05:00Z", "every5m@2026-06-01T09:10:00Z", "every5m@2026-06-01T09:25:00Z")
}

// TestCronSkipsFiresMissedWhileDown starts a scheduler after an entry's
// fire time: that fire is skipped, and the next one fires.
func TestCronSkipsFiresMissedWhileDown(t *testing.T) {
	t.Parallel()
	c := newCronEnv(t)
	c.put("hourly", "@hourly", t0)
	if next := c.round(c.cron, t0.Add(3*time.Hour+time.Minute)); !next.Equal(t0.Add(4 * time.Hour)) {
		t.Fatalf("after the skip the next fire is %s", next)
	}
	c.requireFires()
	c.round(c.cron, t0.Add(4*time.Hour))
	c.requireFires("hourly@2026-06-01T13:00:00Z")
}

// TestCronTwoSchedulersFireOnce runs two schedulers (two servers) on one
// engine: each fire is enqueued once, whichever applies it.
func TestCronTwoSchedulersFireOnce(t *testing.T) {
	t.Parallel()
	c := newCronEnv(t)
	other := scheduler.NewCron(c.b, build, nil, quiet)
	c.put("a", "* * * * *", t0)
	c.put("b", "*/2 * * * *", t0)
	c.round(c.cron, t0)
	c.round(other, t0)
	for m := 1; m <= 4; m++ {
		now := t0.Add(time.Duration(m) * time.Minute)
		first, second := c.cron, other
		if m%2 == 0 {
			first, second = other, first
		}
		c.round(first, now)
		c.round(second, now)
	}
	got := c.fires()
	if len(got) != 6 {
		t.Fatalf("two schedulers over four minutes fired %v, want 4 of a and 2 of b", got)
	}
}

// TestCronPausedAndChangedEntries checks that a paused entry does not
// fire, and that an entry updated after a round read it fires on its new
// schedule only.
func TestCronPausedAndChangedEntries(t *testing.T) {
	t.Parallel()
	c := newCronEnv(t)
	c.put("p", "* * * * *", t0)
	c.round(c.cron, t0)
	if _, err := c.update("p", func(e *broker.CronEntry) { e.Paused, e.NextRun = true, time.Time{} }); err != nil {
		t.Fatal(err)
	}
	if next := c.round(c.cron, t0.Add(5*time.Minute)); !next.IsZero() {
		t.Fatalf("with the only entry paused the round answers %s, want nothing", next)
	}
	c.requireFires()
	if _, err := c.update("p", func(e *broker.CronEntry) { e.Paused, e.NextRun = false, t0.Add(6*time.Minute) }); err != nil {
		t.Fatal(err)
	}
	c.round(c.cron, t0.Add(6*time.Minute))
	c.requireFires("p@2026-06-01T09:06:00Z")

	if _, err := c.update("p", func(e *broker.CronEntry) { e.Spec, e.NextRun = "@hourly", t0.Add(time.Hour) }); err != nil {
		t.Fatal(err)
	}
	c.round(c.cron, t0.Add(7*time.Minute))
	c.round(c.cron, t0.Add(time.Hour))
	c.requireFires("p@2026-06-01T09:06:00Z", "p@2026-06-01T10:00:00Z")
}

// TestCronRefusedTaskStillAdvances gives an entry's tasks a unique key:
// while the previous fire's task holds it the fire is refused, recorded,
// and the entry moves on.
func TestCronRefusedTaskStillAdvances(t *testing.T) {
	t.Parallel()
	c := newCronEnv(t)
	c.cron = scheduler.NewCron(c.b, func(e broker.CronEntry, fireAt time.Time) (broker.NewTask, error) {
		nt, err := build(e, fireAt)
		nt.UniqueKey = "one-at-a-time"
		return nt, err
	}, nil, quiet)
	c.put("u", "* * * * *", t0)
	c.round(c.cron, t0)
	c.round(c.cron, t0.Add(time.Minute))
	if next := c.round(c.cron, t0.Add(2*time.Minute)); !next.Equal(t0.Add(3 * time.Minute)) {
		t.Fatalf("after a refused fire the next is %s", next)
	}
	c.requireFires("u@2026-06-01T09:01:00Z")
}

// TestCronClockMovedBack updates an entry while the wall clock reads
// earlier than its last fire: the scheduler skips past the fired times
// instead of firing one again or retrying forever.
func TestCronClockMovedBack(t *testing.T) {
	t.Parallel()
	c := newCronEnv(t)
	c.put("m", "* * * * *", t0)
	c.round(c.cron, t0)
	c.round(c.cron, t0.Add(5*time.Minute)) // fires 09:01, next 09:06
	// An update at 09:00:30 by a clock gone back.
	if _, err := c.update("m", func(e *broker.CronEntry) { e.NextRun = t0.Add(time.Minute) }); err != nil {
		t.Fatal(err)
	}
	if next := c.round(c.cron, t0.Add(time.Minute)); !next.Equal(t0.Add(2 * time.Minute)) {
		t.Fatalf("a round at the stale next run answers %s, want the minute after the last fire", next)
	}
	c.requireFires("m@2026-06-01T09:01:00Z")
	e, _ := c.b.Cron(t.Context(), "m")
	if !e.NextRun.After(e.LastFire) {
		t.Fatalf("the entry stays stuck: %+v", e)
	}
	c.round(c.cron, e.NextRun)
	c.requireFires("m@2026-06-01T09:01:00Z", "m@"+e.NextRun.UTC().Format(time.RFC3339))
}

// tzChildEnv marks the child process of TestCronSpecWithoutZoneIsUTC.
const tzChildEnv = "CONVEYOR_TEST_TZ_CHILD"

// TestCronSpecWithoutZoneIsUTC runs with the process's local zone New
// York, and passes the times in it as time.Now gives them: a spec that
// names no zone still reads its fields in UTC, so an entry's times do not
// depend on the TZ of the server that runs it. The zone is set for a child
// test process (TZ), not by assigning time.Local, which every goroutine
// of the process reads (the race detector caught that).
func TestCronSpecWithoutZoneIsUTC(t *testing.T) {
	if os.Getenv(tzChildEnv) == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCronSpecWithoutZoneIsUTC$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), "TZ=America/New_York", tzChildEnv+"=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("the test in a process whose zone is New York: %v\n%s", err, out)
		}
		return
	}
	if name, _ := t0.In(time.Local).Zone(); name != "EDT" {
		t.Fatalf("the local zone at %s is %s, want New York's EDT (the test needs the system's zone data, Debian: tzdata)", t0, name)
	}
	start := t0.In(time.Local)

	s, err := scheduler.ParseCronSpec("0 12 * * *", start)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := s.Next(start), t0.Add(3*time.Hour); !got.Equal(want) {
		t.Errorf("\"0 12 * * *\" after %s fires at %s, want %s (noon UTC)", t0, got.UTC(), want)
	}
	c := newCronEnv(t)
	c.put("midnight", "@daily", start)
	c.round(c.cron, start)
	c.round(c.cron, start.Add(15*time.Hour)) // midnight UTC: fires, and schedules the next
	c.requireFires("midnight@2026-06-02T00:00:00Z")
	if e, _ := c.b.Cron(t.Context(), "midnight"); !e.NextRun.Equal(t0.Add(39 * time.Hour)) {
		t.Errorf("after the fire the next run is %s, want the next midnight UTC", e.NextRun.UTC())
	}
}
