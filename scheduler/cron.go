package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/conveyor-dev/conveyor/broker"
)

// cronParser reads the specs CONTRACT.md allows: five fields, or six with
// seconds first; descriptors (@hourly, @every 1m30s); a CRON_TZ= prefix.
var cronParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour |
	cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// CronSchedule says when a cron entry fires after a given time (zero:
// never again).
type CronSchedule interface {
	Next(time.Time) time.Time
}

// ParseCronSpec parses a cron spec (its fields in UTC unless it names a
// zone with CRON_TZ=), refusing one that does not parse or
// that never fires after now (February 30th).
func ParseCronSpec(spec string, now time.Time) (s CronSchedule, err error) {
	defer func() {
		// The parser is a dependency fed operator input: a panic in it
		// must refuse the spec, not end the server.
		if r := recover(); r != nil {
			s, err = nil, fmt.Errorf("spec %q does not parse (the parser panicked: %v)", spec, r)
		}
	}()
	if err := checkShape(spec); err != nil {
		return nil, err
	}
	s, err = parseSpec(spec)
	if err != nil {
		return nil, fmt.Errorf("spec %q does not parse: %w", spec, err)
	}
	if s.Next(now).IsZero() {
		return nil, fmt.Errorf("spec %q never fires", spec)
	}
	return s, nil
}

// parseSpec parses spec in UTC unless it names a zone: the parser's own
// default is the process's local zone, which would make an entry's times
// depend on the TZ of whichever server runs it.
func parseSpec(spec string) (cron.Schedule, error) {
	if !namesZone(spec) && strings.TrimSpace(spec) != "" {
		spec = "CRON_TZ=UTC " + spec
	}
	return cronParser.Parse(spec)
}

func namesZone(spec string) bool {
	return strings.HasPrefix(spec, "CRON_TZ=") || strings.HasPrefix(spec, "TZ=")
}

// checkShape refuses an @every interval the parser would silently change:
// it rounds one below a second up to a second and drops fractions.
//
// It also refuses a time zone with no schedule after it, which panics the
// parser.
func checkShape(spec string) error {
	fields := spec
	if namesZone(fields) {
		var ok bool
		if _, fields, ok = strings.Cut(fields, " "); !ok {
			return fmt.Errorf("spec %q names a time zone but no schedule after it", spec)
		}
	}
	every, ok := strings.CutPrefix(strings.TrimSpace(fields), "@every ")
	if !ok {
		return nil
	}
	d, err := time.ParseDuration(strings.TrimSpace(every))
	switch {
	case err != nil:
		return fmt.Errorf("spec %q does not parse: %w", spec, err)
	case d < time.Second:
		return fmt.Errorf("spec %q: an @every interval must be at least 1s", spec)
	case d%time.Second != 0:
		return fmt.Errorf("spec %q: an @every interval must be whole seconds", spec)
	}
	return nil
}

// CronBuild makes the task a fire of entry e scheduled for fireAt enqueues.
type CronBuild func(e broker.CronEntry, fireAt time.Time) (broker.NewTask, error)

// Cron fires cron entries at their scheduled times. Each entry's NextRun
// is the one fire it waits for; applying it (broker.FireCron) enqueues the
// task and moves NextRun on in one commit, so no fire is applied twice,
// even with several servers firing the same entries. A fire scheduled
// before this scheduler started was missed while the server was down: it
// is skipped, not replayed, as are fires that a slow round overran.
type Cron struct {
	broker broker.Broker
	build  CronBuild
	fired  CronObserver
	log    *slog.Logger
	since  time.Time
	specs  map[string]CronSchedule
}

// CronObserver is told of each fire the scheduler applied, by entry id
// and result: "enqueued" (with the task), "refused" (its task was
// refused, err says why: a unique key held, the queue full) or
// "skipped".
type CronObserver func(id, result string, task *broker.Task, err error)

// NewCron returns a cron scheduler; build makes each fire's task; fired,
// if not nil, is told of each fire applied (for metrics).
func NewCron(b broker.Broker, build CronBuild, fired CronObserver, log *slog.Logger) *Cron {
	if fired == nil {
		fired = func(string, string, *broker.Task, error) {}
	}
	return &Cron{broker: b, build: build, fired: fired, log: log, specs: map[string]CronSchedule{}}
}

// NewCronLoop returns the loop that runs c; kick it when an entry changes.
// It reads the wall clock at least every DefaultMaxSleep.
func NewCronLoop(c *Cron, now func() time.Time, log *slog.Logger) *Loop {
	l := NewLoop("cron", c.Round, now, log)
	l.SetMaxSleep(DefaultMaxSleep)
	return l
}

// fireParallelism bounds the fires a round applies at once: fires of many
// entries due at the same second share group commits rather than waiting
// for one fsync each.
const fireParallelism = 64

// Round applies every fire due at now and returns when the next one is.
// The first round fixes the time before which fires count as missed.
func (c *Cron) Round(ctx context.Context, now time.Time) (time.Time, error) {
	if c.since.IsZero() {
		c.since = now
	}
	entries, err := c.broker.Crons(ctx)
	if err != nil {
		return time.Time{}, err
	}
	specs := make(map[string]CronSchedule, len(entries))
	var (
		earliest time.Time
		fires    []broker.CronFire
	)
	for _, e := range entries {
		f, next := c.due(e, now, specs)
		if f != nil {
			fires = append(fires, *f)
		}
		earliest = earlier(earliest, next)
	}
	c.specs = specs
	var (
		mu      sync.Mutex
		wg      sync.WaitGroup
		failure error
		slots   = make(chan struct{}, fireParallelism)
	)
	for _, f := range fires {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			err := c.apply(ctx, f)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failure = err
			}
		})
		earliest = earlier(earliest, f.Next)
	}
	wg.Wait()
	if failure != nil {
		return time.Time{}, failure
	}
	return earliest, nil
}

// earlier is the earlier of two times, zero meaning none.
func earlier(a, b time.Time) time.Time {
	if a.IsZero() || !b.IsZero() && b.Before(a) {
		return b
	}
	return a
}

// due returns e's fire due at now, if any, and e's next fire time after
// it (zero when it has none: paused, or a spec that never fires again).
func (c *Cron) due(e broker.CronEntry, now time.Time, specs map[string]CronSchedule) (*broker.CronFire, time.Time) {
	if e.Paused || e.NextRun.IsZero() {
		return nil, time.Time{}
	}
	if e.NextRun.After(now) {
		return nil, e.NextRun
	}
	sched, err := c.schedule(e.Spec, specs)
	if err != nil {
		// Specs are checked when stored; one that no longer parses (a
		// time zone gone from the system's database) stops its entry.
		c.log.Error("cron entry has a spec that does not parse; it does not fire", "cron", e.ID, "err", err)
		return nil, time.Time{}
	}
	f := &broker.CronFire{ID: e.ID, FireAt: e.NextRun, Next: sched.Next(now), Now: now, Entry: &e}
	switch {
	case !e.NextRun.After(e.LastFire):
		// Only a wall clock that moved back between a fire and an update
		// gets here; firing would repeat a time already fired.
		f.Skip, f.Next = true, sched.Next(maxTime(now, e.LastFire))
		c.log.Warn("cron entry's next run is not after its last fire (did the clock move back?); skipping past it",
			"cron", e.ID, "scheduled", e.NextRun, "last_fire", e.LastFire)
	case e.NextRun.Before(c.since):
		f.Skip = true
		c.log.Info("cron fire missed while the server was down; skipped", "cron", e.ID, "scheduled", e.NextRun)
	default:
		if f.Task, err = c.build(e, e.NextRun); err != nil {
			c.log.Error("cron entry cannot build its task; the fire is skipped", "cron", e.ID, "scheduled", e.NextRun, "err", err)
			f.Skip = true
		}
	}
	return f, f.Next
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// apply applies one fire; only a storage failure is an error.
func (c *Cron) apply(ctx context.Context, f broker.CronFire) error {
	task, err := c.broker.FireCron(ctx, f)
	switch {
	case err == nil && task != nil:
		c.fired(f.ID, "enqueued", task, nil)
		c.log.Debug("cron fired", "cron", f.ID, "scheduled", f.FireAt, "task", task.ID)
	case err == nil:
		c.fired(f.ID, "skipped", nil, nil)
	case errors.Is(err, broker.ErrAlreadyFired), errors.Is(err, broker.ErrNotFound), errors.Is(err, broker.ErrInvalidState):
		// Another server applied it, or an operator changed, removed or
		// paused the entry since it was read (which kicks the loop): the
		// next round reads the entry anew.
	case errors.Is(err, broker.ErrAlreadyExists), errors.Is(err, broker.ErrInvalidArgument), errors.Is(err, broker.ErrQueueFull):
		// The fire is recorded and its task refused (its unique key is
		// held by the previous fire's task, say, or its queue is at its
		// bound: a fire does not wait for room, the next one may find
		// it).
		c.fired(f.ID, "refused", nil, err)
		c.log.Info("cron fire's task was refused", "cron", f.ID, "scheduled", f.FireAt, "err", err)
	case err != nil:
		return err
	}
	return nil
}

// schedule parses spec, or takes it from the previous round's cache.
func (c *Cron) schedule(spec string, specs map[string]CronSchedule) (CronSchedule, error) {
	if s, ok := specs[spec]; ok {
		return s, nil
	}
	s, ok := c.specs[spec]
	if !ok {
		var err error
		if s, err = parseSpec(spec); err != nil {
			return nil, err
		}
	}
	specs[spec] = s
	return s, nil
}
