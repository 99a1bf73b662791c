package brokertest

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
)

// CopyFixture is a store holding what conveyor copy moves, filled through
// the broker by PopulateCopy, and the store as its broker showed it just
// before it closed. Once the store is copied, Check tells whether the
// copy holds the same and behaves as the store would have after a
// restart, whatever the two engines.
type CopyFixture struct {
	restartFixture
	// A concurrency key of limit 1: its first task was running, the other
	// two wait behind it.
	keyRunning, keyHeld1, keyHeld2 string
	// A task an operator canceled while it ran, and a task that cancels
	// with it.
	cancelRunning, cascade string
	// A task blocked for good: its dependency was archived.
	depFailed string
	// Two members of a group still gathering, and three of a group that
	// fired by size and waits for a worker.
	gathering [2]string
	fired     [3]string
	// A task with every option set, retried once and completed with a
	// result and a retention of its own; and one still waiting.
	richDone, richWaiting string

	tasks  map[string]*broker.Task
	queues []broker.QueueInfo
	crons  []broker.CronEntry
	// history is the queues' history (both engines keep one:
	// broker.HistoryKeeper): each resolution's samples, and the round.
	history map[broker.HistoryResolution][]broker.HistorySample
	round   time.Time
}

// The queues PopulateCopy fills besides restart's ("q", "paused", "idle").
const (
	copyKeyed = "keyed" // a concurrency limit of 1
	copyOther = "other"
	copyBatch = "batch" // groups of 3, fired by size
	copyCfg   = "cfg"   // every configuration field set
	copyRich  = "rich"  // tasks with every option
	copyCron  = "cron"  // what the cron entries enqueue
)

// copyConfig is queue copyCfg's configuration: every field set.
var copyConfig = broker.QueueConfig{ConcurrencyLimit: 2, MaxActive: 3, RatePerSecond: 100, RateBurst: 10,
	Group: broker.GroupPolicy{MaxSize: 5, MaxDelay: 2 * time.Minute, GracePeriod: time.Minute}, MaxWaiting: 1000}

// PopulateCopy fills b, an empty store, with a task in every state
// (restart's fixture) and more: a concurrency key's running and held
// tasks, a task canceled while it ran with a dependent that cascades, a
// task blocked by a failed dependency, a gathering and a fired group, a
// task with every option, queues with configuration and totals, cron
// entries with run history, the queues' history over two rounds. It
// returns the fixture with the store as b shows it then; the caller
// closes b next.
func PopulateCopy(t *testing.T, b broker.Broker) *CopyFixture {
	t.Helper()
	f := &CopyFixture{restartFixture: populate(t, b)}
	ids := f.ids()

	setConfig(t, b, copyKeyed, broker.QueueConfig{ConcurrencyLimit: 1})
	setConfig(t, b, copyBatch, broker.QueueConfig{Group: broker.GroupPolicy{MaxSize: 3, MaxDelay: time.Hour, GracePeriod: time.Hour}})
	setConfig(t, b, copyCfg, copyConfig)

	f.keyRunning = EnqueueOne(t, b, T0, keyed(copyKeyed, "k")).ID
	if l := LeaseOne(t, b, "s1", copyKeyed, T0.Add(time.Minute)); l.Task.ID != f.keyRunning {
		t.Fatalf("leased %s from %s, want %s", l.Task.ID, copyKeyed, f.keyRunning)
	}
	f.keyHeld1 = EnqueueOne(t, b, T0, keyed(copyKeyed, "k")).ID
	f.keyHeld2 = EnqueueOne(t, b, T0, keyed(copyKeyed, "k")).ID
	if n := Ready(b, copyKeyed); n != 0 {
		t.Fatalf("Ready(%s) = %d with its key's one place taken", copyKeyed, n)
	}

	f.cancelRunning = EnqueueOne(t, b, T0, NewTask(copyOther)).ID
	LeaseOne(t, b, "s1", copyOther, T0.Add(time.Minute))
	f.cascade = EnqueueOne(t, b, T0, dependent(copyOther, dep(f.cancelRunning, broker.OnFailureCascadeCancel))).ID
	res, err := b.Act(t.Context(), broker.ActParams{Action: broker.ActionCancel, IDs: []string{f.cancelRunning}, Now: T0.Add(2 * time.Minute)})
	if err != nil || res[0].Err != nil || res[0].Running == nil {
		t.Fatalf("cancel a running task: %+v, %v", res, err)
	}
	dead := EnqueueOne(t, b, T0, NewTask(copyOther))
	Archive(t, b, "s1", LeaseOne(t, b, "s1", copyOther, T0.Add(time.Minute)), "gone", T0.Add(time.Minute))
	f.depFailed = EnqueueOne(t, b, T0.Add(2*time.Minute), dependent(copyOther, dep(dead.ID, broker.OnFailureBlock))).ID
	ids = append(ids, f.keyRunning, f.keyHeld1, f.keyHeld2, f.cancelRunning, f.cascade, dead.ID, f.depFailed)

	for i := range f.gathering {
		f.gathering[i] = EnqueueOne(t, b, T0.Add(time.Duration(i)*time.Second), grouped(copyBatch, "g", "t")).ID
	}
	for i := range f.fired {
		f.fired[i] = EnqueueOne(t, b, T0.Add(time.Duration(i)*time.Second), grouped(copyBatch, "f", "t")).ID
	}
	if n := readyGroups(b, copyBatch, "t"); n != 1 {
		t.Fatalf("ReadyGroups(%s) = %d, want the group of 3 fired", copyBatch, n)
	}
	ids = append(append(ids, f.gathering[:]...), f.fired[:]...)

	f.richDone, f.richWaiting = populateRich(t, b)
	ids = append(ids, f.richDone, f.richWaiting, EnqueueOne(t, b, T0, NewTask(copyCfg)).ID)
	ids = append(ids, populateCrons(t, b)...)

	f.tasks = map[string]*broker.Task{}
	for _, id := range ids {
		f.tasks[id] = GetTask(t, b, id)
	}
	if f.queues, err = b.Queues(t.Context()); err != nil {
		t.Fatal(err)
	}
	if f.crons, err = b.Crons(t.Context()); err != nil {
		t.Fatal(err)
	}
	f.history, f.round = populateHistory(t, b)
	return f
}

// populateHistory records two rounds of the queues' history, a minute and
// then a day apart, and returns what b then keeps.
func populateHistory(t *testing.T, b broker.Broker) (map[broker.HistoryResolution][]broker.HistorySample, time.Time) {
	t.Helper()
	hk := b.(broker.HistoryKeeper)
	sample := func(queue string, n int64, at time.Time) broker.HistorySample {
		return broker.HistorySample{HistoryCounters: broker.HistoryCounters{Queue: queue, Enqueued: 3 * n, Processed: 2 * n, Failed: n}, Bucket: at}
	}
	for _, round := range []time.Time{T0.Add(time.Minute), T0.Add(25 * time.Hour)} {
		samples := []broker.HistorySample{sample(copyOther, round.Unix()%97, round), sample(copyCfg, 5, round)}
		if err := hk.RecordHistory(t.Context(), round, samples); err != nil {
			t.Fatalf("RecordHistory: %v", err)
		}
	}
	kept := map[broker.HistoryResolution][]broker.HistorySample{}
	for _, res := range broker.HistoryResolutions {
		s, err := hk.History(t.Context(), res, "", time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		kept[res] = s
	}
	round, err := hk.HistoryRound(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(kept[broker.HistoryDay]) != 4 || len(kept[broker.HistoryMinute]) != 2 || !round.Equal(T0.Add(25*time.Hour)) {
		t.Fatalf("history kept: %+v, round %s; want 4 days' samples, the last round's 2 minutes' and its time", kept, round)
	}
	return kept, round
}

// populateRich adds, to queue copyRich, a task with every option that
// failed once and then completed with a result, and one that waits.
func populateRich(t *testing.T, b broker.Broker) (done, waiting string) {
	t.Helper()
	hour := time.Hour
	rich := func() broker.NewTask {
		nt := NewTask(copyRich)
		nt.Type, nt.ContentType, nt.Payload = "rich", "text/plain", []byte("a payload")
		nt.Metadata = map[string]string{"tenant": "acme", "trace": "t-1"}
		nt.Options = []byte{0x08, 0x01, 0x10, 0x02}
		nt.Priority, nt.MaxRetry = 7, 3
		nt.ExpiresAt, nt.Deadline, nt.Timeout = T0.Add(48*time.Hour), T0.Add(72*time.Hour), 30*time.Second
		nt.RetryPolicy = &broker.RetryPolicy{Strategy: broker.RetryLinear, Base: time.Second, Max: time.Minute}
		nt.Retention = &hour
		return nt
	}
	nt := rich()
	nt.UniqueKey, nt.UniqueUntil = "rich-done", T0.Add(24*time.Hour)
	done = EnqueueOne(t, b, T0, nt).ID
	Fail(t, b, "s1", LeaseOne(t, b, "s1", copyRich, T0), "first try failed", T0.Add(time.Second), T0.Add(2*time.Second))
	if _, err := b.PromoteDue(t.Context(), T0.Add(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	l := LeaseOne(t, b, "s1", copyRich, T0.Add(3*time.Second))
	if err := b.Progress(t.Context(), broker.ProgressParams{SessionID: "s1", Lease: Ref(l), Percent: 60, Message: "most"}); err != nil {
		t.Fatal(err)
	}
	Decide(t, b, broker.Completed("s1", Ref(l), T0.Add(4*time.Second), []byte("the rich result")))
	nt = rich()
	nt.UniqueKey, nt.UniqueUntil = "rich-waiting", T0.Add(24*time.Hour)
	nt.ProcessAt = T0.Add(20 * time.Minute)
	nt.AtMostOnce = true
	waiting = EnqueueOne(t, b, T0, nt).ID
	return done, waiting
}

// populateCrons adds three cron entries: one that fired (its task is
// returned), one whose fire was refused (its task's unique key was held),
// one paused that never fired.
func populateCrons(t *testing.T, b broker.Broker) []string {
	t.Helper()
	ctx := t.Context()
	entry := func(id string) broker.CronEntry {
		c := cronEntry(id)
		c.Queue = copyCron
		return c
	}
	for _, id := range []string{"fired", "refused"} {
		if _, err := b.CreateCron(ctx, entry(id)); err != nil {
			t.Fatal(err)
		}
	}
	paused := entry("paused")
	paused.Paused, paused.NextRun = true, time.Time{}
	if _, err := b.CreateCron(ctx, paused); err != nil {
		t.Fatal(err)
	}
	fr := fire("fired", at(time.Minute), at(2*time.Minute))
	fr.Task.Queue, fr.Task.UniqueKey = copyCron, "cron-unique"
	task, err := b.FireCron(ctx, fr)
	if err != nil {
		t.Fatal(err)
	}
	fr = fire("refused", at(time.Minute), at(2*time.Minute))
	fr.Task.Queue, fr.Task.UniqueKey = copyCron, "cron-unique"
	if _, err := b.FireCron(ctx, fr); !errors.Is(err, broker.ErrAlreadyExists) {
		t.Fatalf("a fire whose task's unique key is held: %v, want ErrAlreadyExists", err)
	}
	return []string{task.ID}
}

// Check fails t unless b, opened on a copy of the fixture's store, holds
// every task as the store's broker showed it (a running task PENDING, as
// after a restart; one canceled while it ran CANCELED, and its cascading
// dependent with it), every queue with its configuration, totals and
// counts, and every cron entry; and unless it behaves as the store would
// have: unique keys still held, the paused queue paused, the key's held
// tasks still held, the groups firing, the BLOCKED task released by its
// dependency, the purge and timer indexes in place.
func (f *CopyFixture) Check(t *testing.T, b broker.Broker) {
	t.Helper()
	f.checkTasks(t, b)
	f.checkQueues(t, b)
	f.checkCrons(t, b)
	f.checkHistory(t, b)
	f.checkBehaviour(t, b)
}

// want is the fixture's tasks as a restart leaves them; the end of the
// canceled ones is read from got (it is the open's own time).
func (f *CopyFixture) want(t *testing.T, b broker.Broker) map[string]*broker.Task {
	t.Helper()
	want := map[string]*broker.Task{}
	for id, task := range f.tasks {
		w := *task
		switch {
		case id == f.cancelRunning:
			w.State = canceled
			w.CompletedAt = GetTask(t, b, id).CompletedAt
		case id == f.cascade:
			w.State, w.LastError = canceled, fmt.Sprintf("dependency %s ended canceled", f.cancelRunning)
			w.CompletedAt = GetTask(t, b, id).CompletedAt
		case w.State == active:
			w.State = pending
		}
		if w.State != active {
			w.SessionID, w.LeaseToken = "", 0
		}
		want[id] = &w
	}
	// The links show the states the tasks linked are in now.
	for _, w := range want {
		w.DependsOn, w.Dependents = slices.Clone(w.DependsOn), slices.Clone(w.Dependents)
		for i, d := range w.DependsOn {
			if x := want[d.TaskID]; x != nil {
				w.DependsOn[i].State = x.State
			}
		}
		for i, d := range w.Dependents {
			if x := want[d.TaskID]; x != nil {
				w.Dependents[i].State = x.State
			}
		}
	}
	return want
}

func (f *CopyFixture) checkTasks(t *testing.T, b broker.Broker) {
	t.Helper()
	for id, w := range f.want(t, b) {
		got := GetTask(t, b, id)
		if (id == f.cancelRunning || id == f.cascade) && got.CompletedAt.IsZero() {
			t.Errorf("task %s is %s with no end time", id, got.State)
		}
		d := DiffTasks(got, w)
		if fmt.Sprint(got.Dependents) != fmt.Sprint(w.Dependents) {
			d = append(d, fmt.Sprintf("Dependents: got %v, want %v", got.Dependents, w.Dependents))
		}
		if len(d) > 0 {
			t.Errorf("task %s in the copy differs:\n%s", id, strings.Join(d, "\n"))
		}
	}
}

func (f *CopyFixture) checkQueues(t *testing.T, b broker.Broker) {
	t.Helper()
	want := map[string]broker.Counts{}
	for _, w := range f.want(t, b) {
		c := want[w.Queue]
		c[w.State]++
		want[w.Queue] = c
	}
	got, err := b.Queues(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(f.queues) {
		t.Fatalf("the copy has %d queues, the store had %d:\n%+v\n%+v", len(got), len(f.queues), got, f.queues)
	}
	for i, g := range got {
		w := f.queues[i]
		if g.Name != w.Name || g.Paused != w.Paused || g.Config != w.Config || g.Enqueued != w.Enqueued ||
			g.Processed != w.Processed || g.Failed != w.Failed || g.Expired != w.Expired {
			t.Errorf("queue in the copy %+v, want %+v", g, w)
		}
		if g.Counts != want[w.Name] {
			t.Errorf("queue %q in the copy counts %s, want %s", g.Name, formatCounts(g.Counts), formatCounts(want[w.Name]))
		}
	}
}

func (f *CopyFixture) checkCrons(t *testing.T, b broker.Broker) {
	t.Helper()
	got, err := b.Crons(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	same := func(a, b broker.CronEntry) bool {
		return a.ID == b.ID && a.Spec == b.Spec && a.Queue == b.Queue && a.Type == b.Type && bytes.Equal(a.Payload, b.Payload) &&
			a.ContentType == b.ContentType && maps.Equal(a.Metadata, b.Metadata) && bytes.Equal(a.Options, b.Options) &&
			a.Paused == b.Paused && a.NextRun.Equal(b.NextRun) && a.LastRun.Equal(b.LastRun) &&
			a.LastFire.Equal(b.LastFire) && a.LastTaskID == b.LastTaskID && a.LastError == b.LastError
	}
	if !slices.EqualFunc(got, f.crons, same) {
		t.Errorf("cron entries in the copy:\n%+v\nwant:\n%+v", got, f.crons)
	}
}

func (f *CopyFixture) checkHistory(t *testing.T, b broker.Broker) {
	t.Helper()
	hk := b.(broker.HistoryKeeper)
	for _, res := range broker.HistoryResolutions {
		got, err := hk.History(t.Context(), res, "", time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		same := func(a, b broker.HistorySample) bool {
			return a.HistoryCounters == b.HistoryCounters && a.Bucket.Equal(b.Bucket)
		}
		if !slices.EqualFunc(got, f.history[res], same) {
			t.Errorf("history at resolution %d in the copy:\n%+v\nwant:\n%+v", res, got, f.history[res])
		}
	}
	if round, err := hk.HistoryRound(t.Context()); err != nil || !round.Equal(f.round) {
		t.Errorf("history round in the copy: %s (%v), want %s", round, err, f.round)
	}
}

func (f *CopyFixture) checkBehaviour(t *testing.T, b broker.Broker) {
	t.Helper()
	now := T0.Add(10 * time.Minute)
	// Unique claims hold, whichever task they were claimed by.
	for _, uk := range []string{"uk-pending", "uk-scheduled", "rich-waiting", "cron-unique"} {
		nt := NewTask("q")
		nt.UniqueKey = uk
		requireItemErr(t, enqueueResults(t, b, now, nt), 0, broker.ErrAlreadyExists)
	}
	// The paused queue stays paused.
	if n := Ready(b, "paused"); n != 0 {
		t.Errorf("Ready(paused) = %d in the copy", n)
	}
	if ls := Lease(t, b, "s2", "paused", 10, now, TTL); len(ls) != 0 {
		t.Errorf("leased %d tasks from the paused queue", len(ls))
	}
	// The key lets one task run: the one that ran, then those held, in turn.
	for _, id := range []string{f.keyRunning, f.keyHeld1, f.keyHeld2} {
		if n := Ready(b, copyKeyed); n != 1 {
			t.Fatalf("Ready(%s) = %d, want 1: its key lets one task run", copyKeyed, n)
		}
		ls := Lease(t, b, "s2", copyKeyed, 10, now, TTL)
		if len(ls) != 1 || ls[0].Task.ID != id {
			t.Fatalf("leased %v from %s, want %s alone", ls, copyKeyed, id)
		}
		if n := Ready(b, copyKeyed); n != 0 {
			t.Fatalf("Ready(%s) = %d while its key's task runs", copyKeyed, n)
		}
		Succeed(t, b, "s2", ls[0], now)
	}
	// The BLOCKED task is released once its dependency completes.
	RequireState(t, b, f.blocked, blocked)
	for _, l := range Lease(t, b, "s2", "q", 10, now, TTL) {
		if l.Task.ID == f.pending {
			Succeed(t, b, "s2", l, now)
		}
	}
	RequireState(t, b, f.pending, completed)
	RequireState(t, b, f.blocked, pending)
	RequireState(t, b, f.depFailed, blocked)
	// The fired group waits for a worker; the gathering one fires when a
	// third member joins.
	last := EnqueueOne(t, b, now, grouped(copyBatch, "g", "t"))
	gl := leaseGroups(t, b, copyBatch, 10, now, "t")
	if len(gl) != 2 {
		t.Fatalf("leased %d groups of %s, want the fired one and the one that filled", len(gl), copyBatch)
	}
	for i, want := range [][]string{f.fired[:], {f.gathering[0], f.gathering[1], last.ID}} {
		var got []string
		for _, l := range gl[i].Leases {
			got = append(got, l.Task.ID)
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("group %d leased %v, want %v", i, got, want)
		}
	}
	// Timers: the expiry and the schedule come due.
	if _, err := b.PromoteDue(t.Context(), now); err != nil {
		t.Fatal(err)
	}
	RequireState(t, b, f.expiring, archived)
	RequireState(t, b, f.sched, pending)
	RequireState(t, b, f.richWaiting, scheduled)
	// Purge: the task with no retention goes first, the one with a
	// retention of its own an hour after it ended, the others at their
	// class's horizon.
	Purge(t, b, T0.Add(time.Hour))
	if _, err := b.GetTask(t.Context(), f.doneNoRetention); !errors.Is(err, broker.ErrNotFound) {
		t.Errorf("task %s with no retention after Purge: %v", f.doneNoRetention, err)
	}
	RequireState(t, b, f.richDone, completed)
	RequireState(t, b, f.done, completed)
	Purge(t, b, f.tasks[f.richDone].CompletedAt.Add(time.Hour))
	if _, err := b.GetTask(t.Context(), f.richDone); !errors.Is(err, broker.ErrNotFound) {
		t.Errorf("task %s past its own retention after Purge: %v", f.richDone, err)
	}
	RequireState(t, b, f.done, completed)
}
