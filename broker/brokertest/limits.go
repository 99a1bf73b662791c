package brokertest

import (
	"testing"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
)

func limitCases() []testCase {
	return []testCase{
		{name: "ConcurrencyKey", fn: testConcurrencyKey},
		{name: "ConcurrencyKeyNoHeadOfLine", fn: testConcurrencyKeyNoHOL},
		{name: "ConcurrencyLimitRaised", fn: testConcurrencyLimitRaised},
		{name: "ConcurrencyLimitLowered", fn: testConcurrencyLimitLowered},
		{name: "ConcurrencyLimitLoweredUnderActive", fn: testConcurrencyLimitLoweredUnderActive},
		{name: "ConcurrencyKeyReleasedEveryWay", fn: testConcurrencyKeyReleased},
		{name: "ConcurrencyKeyWhileOthersWait", fn: testConcurrencyKeyWhileOthersWait},
		{name: "MaxActive", env: testMaxActive},
		{name: "RateLimit", fn: testRateLimit},
		{name: "RateLimitAcrossRestart", env: testRateLimitAcrossRestart},
		{name: "RateLimitAcrossConfigChange", fn: testRateLimitAcrossConfigChange},
		{name: "RateLimitGroups", fn: testRateLimitGroups},
		{name: "RateLimitGroupsWoken", env: testRateLimitGroupsWoken},
		{name: "RateLimitWoken", env: testRateLimitWoken},
		{name: "RateLimitGroupsNotStarved", fn: testRateLimitGroupsNotStarved},
		{name: "RateLimitGroupHoldIsItsOwn", fn: testRateLimitGroupHoldIsItsOwn},
		{name: "RateLimitGroupHoldEndsWithGroup", fn: testRateLimitGroupHoldEndsWithGroup},
		{name: "ConfigPersists", env: testConfigPersists},
	}
}

func keyed(queue, key string) broker.NewTask {
	nt := NewTask(queue)
	nt.ConcurrencyKey = key
	return nt
}

func setConfig(t testing.TB, b broker.Broker, queue string, cfg broker.QueueConfig) {
	t.Helper()
	info, err := b.UpdateQueueConfig(t.Context(), queue, func(c *broker.QueueConfig) { *c = cfg })
	if err != nil {
		t.Fatalf("SetQueueConfig: %v", err)
	}
	if info.Config != cfg {
		t.Fatalf("SetQueueConfig answered %+v, want %+v", info.Config, cfg)
	}
}

func testConcurrencyKey(t *testing.T, b broker.Broker) {
	a := Enqueue(t, b, T0, keyed("q", "k"), keyed("q", "k"), keyed("q", "k"))
	if n := Ready(b, "q"); n != 1 {
		t.Fatalf("Ready = %d with 3 tasks on one key of limit 1, want 1", n)
	}
	ls := Lease(t, b, "s1", "q", 10, T0, TTL)
	if len(ls) != 1 || ls[0].Task.ID != a[0].ID {
		t.Fatalf("leased %d tasks, want the first of the key only", len(ls))
	}
	if n := Ready(b, "q"); n != 0 {
		t.Fatalf("Ready = %d while the key's only slot runs", n)
	}
	Succeed(t, b, "s1", ls[0], T0)
	if l := LeaseOne(t, b, "s1", "q", T0); l.Task.ID != a[1].ID {
		t.Fatalf("after the first finished, leased %s, want the second", l.Task.ID)
	}
	RequireCounts(t, b, "q", Counts{active: 1, pending: 1, completed: 1})
}

func testConcurrencyKeyNoHOL(t *testing.T, b broker.Broker) {
	Enqueue(t, b, T0, keyed("q", "k"), keyed("q", "k"), keyed("q", "k"))
	free := Enqueue(t, b, T0, NewTask("q"), keyed("q", "other"))
	ls := Lease(t, b, "s1", "q", 10, T0, TTL)
	if len(ls) != 3 {
		t.Fatalf("leased %d, want 3: one of key k, and the two behind it", len(ls))
	}
	got := map[string]bool{}
	for _, l := range ls {
		got[l.Task.ID] = true
	}
	for _, f := range free {
		if !got[f.ID] {
			t.Fatalf("task %s behind a held key was not leased", f.ID)
		}
	}
}

func testConcurrencyLimitRaised(t *testing.T, b broker.Broker) {
	Enqueue(t, b, T0, keyed("q", "k"), keyed("q", "k"), keyed("q", "k"), keyed("q", "k"))
	if n := len(Lease(t, b, "s1", "q", 10, T0, TTL)); n != 1 {
		t.Fatalf("leased %d with limit 1", n)
	}
	setConfig(t, b, "q", broker.QueueConfig{ConcurrencyLimit: 3})
	if n := len(Lease(t, b, "s1", "q", 10, T0, TTL)); n != 2 {
		t.Fatalf("leased %d more after raising the limit to 3, want 2", n)
	}
	if n := len(Lease(t, b, "s1", "q", 10, T0, TTL)); n != 0 {
		t.Fatalf("leased %d past the limit", n)
	}
}

// testConcurrencyLimitLowered: a lower limit holds from the moment it is
// set, for the tasks its key had already let into the ready line too.
func testConcurrencyLimitLowered(t *testing.T, b broker.Broker) {
	setConfig(t, b, "q", broker.QueueConfig{ConcurrencyLimit: 3})
	ts := Enqueue(t, b, T0, keyed("q", "k"), keyed("q", "k"), keyed("q", "k"))
	setConfig(t, b, "q", broker.QueueConfig{ConcurrencyLimit: 1})
	ls := Lease(t, b, "s1", "q", 10, T0, TTL)
	if len(ls) != 1 || ls[0].Task.ID != ts[0].ID {
		t.Fatalf("leased %d tasks after the limit went from 3 to 1, want the first only", len(ls))
	}
	if n := len(Lease(t, b, "s1", "q", 10, T0, TTL)); n != 0 {
		t.Fatalf("leased %d more while the key's one slot runs", n)
	}
	for i := 1; i < len(ts); i++ {
		Succeed(t, b, "s1", ls[0], T0)
		ls = Lease(t, b, "s1", "q", 10, T0, TTL)
		if len(ls) != 1 || ls[0].Task.ID != ts[i].ID {
			t.Fatalf("after task %d finished, leased %d tasks, want task %d alone", i-1, len(ls), i)
		}
	}
	RequireCounts(t, b, "q", Counts{active: 1, completed: 2})
}

// testConcurrencyLimitLoweredUnderActive: tasks already ACTIVE when the
// limit is lowered finish, and no other task of the key starts until
// fewer than the new limit run.
func testConcurrencyLimitLoweredUnderActive(t *testing.T, b broker.Broker) {
	setConfig(t, b, "q", broker.QueueConfig{ConcurrencyLimit: 3})
	ts := Enqueue(t, b, T0, keyed("q", "k"), keyed("q", "k"), keyed("q", "k"), keyed("q", "k"), keyed("q", "k"))
	running := Lease(t, b, "s1", "q", 10, T0, TTL)
	if len(running) != 3 {
		t.Fatalf("leased %d with limit 3, want 3", len(running))
	}
	setConfig(t, b, "q", broker.QueueConfig{ConcurrencyLimit: 2})
	Succeed(t, b, "s1", running[0], T0)
	if n := len(Lease(t, b, "s1", "q", 10, T0, TTL)); n != 0 {
		t.Fatalf("leased %d with 2 of the key ACTIVE under a limit of 2, want 0", n)
	}
	Succeed(t, b, "s1", running[1], T0)
	ls := Lease(t, b, "s1", "q", 10, T0, TTL)
	if len(ls) != 1 || ls[0].Task.ID != ts[3].ID {
		t.Fatalf("leased %d once 1 of the key ran under a limit of 2, want the fourth task alone", len(ls))
	}
}

// testConcurrencyKeyReleased: a key's slot comes back whatever ends the
// attempt, and whatever takes a held or ready task away.
func testConcurrencyKeyReleased(t *testing.T, b broker.Broker) {
	ts := Enqueue(t, b, T0, keyed("q", "k"), keyed("q", "k"), keyed("q", "k"), keyed("q", "k"), keyed("q", "k"))
	next := func(what string) broker.Lease {
		t.Helper()
		ls := Lease(t, b, "s1", "q", 10, at(time.Minute), TTL)
		if len(ls) != 1 {
			t.Fatalf("after %s: leased %d, want 1", what, len(ls))
		}
		return ls[0]
	}
	l := next("enqueue")
	Fail(t, b, "s1", l, "x", T0, at(time.Hour)) // RETRY: the slot is free
	l = next("a failure")
	Decide(t, b, broker.Released("s1", Ref(l), T0)) // back to pending, at the end
	next("a release")
	Reap(t, b, at(time.Minute).Add(TTL))
	l = next("a lapse")
	// The task held behind it is canceled: the key admits none twice.
	actOK(t, b, broker.ActionCancel, T0, ts[4].ID)
	Succeed(t, b, "s1", l, at(time.Minute))
	next("a success")
	if n := len(Lease(t, b, "s1", "q", 10, at(time.Minute), TTL)); n != 0 {
		t.Fatalf("leased %d past the limit", n)
	}
}

// testConcurrencyKeyWhileOthersWait: a key's limit holds for its tasks
// that wait on a timer (RETRY, SCHEDULED) while every other task of the
// key finishes and a new one runs: when they come back, they wait for
// the one running.
func testConcurrencyKeyWhileOthersWait(t *testing.T, b broker.Broker) {
	later := keyed("q", "k")
	later.ProcessAt = at(10 * time.Second)
	Enqueue(t, b, T0, keyed("q", "k"), keyed("q", "k"), later)
	a := LeaseOne(t, b, "s1", "q", T0)
	Fail(t, b, "s1", a, "x", T0, at(10*time.Second)) // RETRY; the second is admitted
	Succeed(t, b, "s1", LeaseOne(t, b, "s1", "q", T0), T0)
	// No task of the key is ready, held or ACTIVE now; two wait on a timer.
	c := EnqueueOne(t, b, T0, keyed("q", "k"))
	running := LeaseOne(t, b, "s1", "q", T0)
	if running.Task.ID != c.ID {
		t.Fatalf("leased %s, want the new task %s", running.Task.ID, c.ID)
	}
	now := at(11 * time.Second)
	promote(t, b, now) // the RETRY and the SCHEDULED task are due
	RequireCounts(t, b, "q", Counts{active: 1, pending: 2, completed: 1})
	// Each runs in turn, one at a time.
	for turn := range 3 {
		if ls := Lease(t, b, "s1", "q", 10, now, TTL); len(ls) != 0 {
			t.Fatalf("turn %d: leased %d more of key k while %s runs (limit 1)", turn, len(ls), running.Task.ID)
		}
		Succeed(t, b, "s1", running, now)
		if turn < 2 {
			running = LeaseOne(t, b, "s1", "q", now)
		}
	}
	RequireCounts(t, b, "q", Counts{completed: 4})
}

func testMaxActive(t *testing.T, e *Env) {
	b := e.B
	setConfig(t, b, "q", broker.QueueConfig{MaxActive: 2})
	for range 5 {
		EnqueueOne(t, b, T0, NewTask("q"))
	}
	if n := Ready(b, "q"); n != 2 {
		t.Fatalf("Ready = %d with max_active 2", n)
	}
	ls := Lease(t, b, "s1", "q", 10, T0, TTL)
	if len(ls) != 2 {
		t.Fatalf("leased %d with max_active 2", len(ls))
	}
	if n := len(Lease(t, b, "s2", "q", 10, T0, TTL)); n != 0 {
		t.Fatalf("another session leased %d past the cap", n)
	}
	e.Notes.Lapsed()
	for len(e.Notes.ready) > 0 {
		<-e.Notes.ready
	}
	Succeed(t, b, "s1", ls[0], T0)
	e.Notes.RequireReady(t, "q") // room again: the sessions are woken
	if n := len(Lease(t, b, "s2", "q", 10, T0, TTL)); n != 1 {
		t.Fatalf("leased %d after one finished, want 1", n)
	}
}

func testRateLimit(t *testing.T, b broker.Broker) {
	setConfig(t, b, "q", broker.QueueConfig{RatePerSecond: 10, RateBurst: 3})
	for range 20 {
		EnqueueOne(t, b, T0, NewTask("q"))
	}
	if n := len(Lease(t, b, "s1", "q", 20, T0, TTL)); n != 3 {
		t.Fatalf("leased %d at first, want the burst of 3", n)
	}
	if n := len(Lease(t, b, "s1", "q", 20, T0.Add(50*time.Millisecond), TTL)); n != 0 {
		t.Fatalf("leased %d 50ms later at 10/s, want 0", n)
	}
	if n := len(Lease(t, b, "s1", "q", 20, T0.Add(250*time.Millisecond), TTL)); n != 2 {
		t.Fatalf("leased %d 250ms in at 10/s, want 2", n)
	}
	if n := len(Lease(t, b, "s1", "q", 20, T0.Add(10*time.Second), TTL)); n != 3 {
		t.Fatalf("leased %d after a long pause, want the burst of 3 (tokens do not pile up)", n)
	}
}

// testRateLimitAcrossRestart: "at most burst + per_second × d over any
// interval of d" holds across a restart: the dispatches of the engine's
// last run count, so a reopened engine does not start with a full bucket.
func testRateLimitAcrossRestart(t *testing.T, e *Env) {
	setConfig(t, e.B, "q", broker.QueueConfig{RatePerSecond: 1, RateBurst: 2})
	for range 10 {
		EnqueueOne(t, e.B, T0, NewTask("q"))
	}
	if n := len(Lease(t, e.B, "s1", "q", 10, T0, TTL)); n != 2 {
		t.Fatalf("leased %d at first, want the burst of 2", n)
	}
	b := e.Reopen()
	if _, err := b.PromoteDue(t.Context(), T0); err != nil {
		t.Fatalf("PromoteDue: %v", err)
	}
	if n := len(Lease(t, b, "s1", "q", 10, T0, TTL)); n != 0 {
		t.Fatalf("leased %d right after a restart, in the millisecond the burst went, want 0", n)
	}
	if n := len(Lease(t, b, "s1", "q", 10, at(time.Second), TTL)); n != 1 {
		t.Fatalf("leased %d a second after the restart at 1/s, want 1", n)
	}
}

// testRateLimitAcrossConfigChange: a configuration change, even one that
// leaves the rate as it was, does not refill the bucket.
func testRateLimitAcrossConfigChange(t *testing.T, b broker.Broker) {
	setConfig(t, b, "q", broker.QueueConfig{RatePerSecond: 1, RateBurst: 2})
	for range 10 {
		EnqueueOne(t, b, T0, NewTask("q"))
	}
	if n := len(Lease(t, b, "s1", "q", 10, T0, TTL)); n != 2 {
		t.Fatalf("leased %d at first, want the burst of 2", n)
	}
	setConfig(t, b, "q", broker.QueueConfig{RatePerSecond: 1, RateBurst: 2, MaxActive: 100})
	if n := len(Lease(t, b, "s1", "q", 10, T0, TTL)); n != 0 {
		t.Fatalf("leased %d after a configuration change in the same instant, want 0", n)
	}
	setConfig(t, b, "q", broker.QueueConfig{RatePerSecond: 1, RateBurst: 1})
	if n := len(Lease(t, b, "s1", "q", 10, at(5*time.Second), TTL)); n != 1 {
		t.Fatalf("leased %d after the burst was lowered to 1, want 1", n)
	}
}

// testRateLimitGroups: a fired group's members take a token each from
// the queue's rate bucket, as tasks leased alone do; a group waits until
// the bucket holds a token per member (a full bucket, for a group of more
// members than the burst, which then leaves the bucket in debt).
func testRateLimitGroups(t *testing.T, b broker.Broker) {
	cfg := broker.QueueConfig{RatePerSecond: 10, RateBurst: 3, Group: broker.GroupPolicy{MaxSize: 2, MaxDelay: time.Hour, GracePeriod: time.Hour}}
	setConfig(t, b, "q", cfg)
	Enqueue(t, b, T0, grouped("q", "g", "t"), grouped("q", "g", "t"), NewTask("q"), NewTask("q"), NewTask("q"))
	if gl := leaseGroups(t, b, "q", 5, T0, "t"); len(gl) != 1 || len(gl[0].Leases) != 2 {
		t.Fatalf("LeaseGroups with a full bucket of 3 = %+v, want the group of 2", gl)
	}
	if n := len(Lease(t, b, "s1", "q", 10, T0, TTL)); n != 1 {
		t.Fatalf("leased %d alone after a group of 2 took 2 of the 3 tokens, want 1", n)
	}
	Enqueue(t, b, T0, grouped("q", "g", "t"), grouped("q", "g", "t"))
	if gl := leaseGroups(t, b, "q", 5, at(100*time.Millisecond), "t"); len(gl) != 0 {
		t.Fatalf("LeaseGroups with 1 token for 2 members = %+v, want none", gl)
	}
	if gl := leaseGroups(t, b, "q", 5, at(200*time.Millisecond), "t"); len(gl) != 1 || len(gl[0].Leases) != 2 {
		t.Fatalf("LeaseGroups once 2 tokens came back = %+v, want the group of 2", gl)
	}
	if n := len(Lease(t, b, "s1", "q", 10, at(200*time.Millisecond), TTL)); n != 0 {
		t.Fatalf("leased %d alone with the bucket empty", n)
	}

	cfg.Group.MaxSize = 5 // more than the burst (the change fills the bucket)
	setConfig(t, b, "q", cfg)
	Enqueue(t, b, T0, grouped("q", "g", "t"), grouped("q", "g", "t"), grouped("q", "g", "t"), grouped("q", "g", "t"), grouped("q", "g", "t"))
	if gl := leaseGroups(t, b, "q", 5, at(time.Second), "t"); len(gl) != 1 || len(gl[0].Leases) != 5 {
		t.Fatalf("LeaseGroups of a group of 5 with a full bucket of 3 = %+v, want the group", gl)
	}
	// 3 - 5 = -2 tokens: the next task waits 300ms for a token.
	if n := len(Lease(t, b, "s1", "q", 10, at(time.Second+200*time.Millisecond), TTL)); n != 0 {
		t.Fatalf("leased %d alone with the bucket in debt", n)
	}
	if n := len(Lease(t, b, "s1", "q", 10, at(time.Second+300*time.Millisecond), TTL)); n != 1 {
		t.Fatalf("leased %d alone once the debt was paid and a token came back, want 1", n)
	}
}

// testRateLimitGroupsWoken: a queue whose only work is a fired group that
// waits for the rate bucket signals TasksReady once the bucket can pay
// for it: PromoteDue asks to run by then (200ms here), and then signals.
func testRateLimitGroupsWoken(t *testing.T, e *Env) {
	b := e.B
	setConfig(t, b, "q", broker.QueueConfig{RatePerSecond: 10, RateBurst: 2, Group: broker.GroupPolicy{MaxSize: 2, MaxDelay: time.Hour, GracePeriod: time.Hour}})
	Enqueue(t, b, T0, grouped("q", "g", "t"), grouped("q", "g", "t"))
	if gl := leaseGroups(t, b, "q", 5, T0, "t"); len(gl) != 1 {
		t.Fatalf("LeaseGroups with a full bucket = %+v, want the group", gl)
	}
	Enqueue(t, b, T0, grouped("q", "g", "t"), grouped("q", "g", "t"))
	drainReady(e.Notes) // the fire's signal, and any timer's so far
	if gl := leaseGroups(t, b, "q", 5, T0, "t"); len(gl) != 0 {
		t.Fatalf("LeaseGroups with the bucket empty = %+v, want none", gl)
	}
	next, err := b.PromoteDue(t.Context(), T0)
	if err != nil {
		t.Fatalf("PromoteDue: %v", err)
	}
	if next.IsZero() || !next.After(T0) || next.After(at(200*time.Millisecond)) {
		t.Fatalf("PromoteDue with a group waiting for the bucket asks to run at %v, want by the refill at %v", next, at(200*time.Millisecond))
	}
	e.Notes.RequireNoReady(t)
	if _, err := b.PromoteDue(t.Context(), at(200*time.Millisecond)); err != nil {
		t.Fatalf("PromoteDue: %v", err)
	}
	e.Notes.RequireReady(t, "q")
	if gl := leaseGroups(t, b, "q", 5, at(200*time.Millisecond), "t"); len(gl) != 1 {
		t.Fatalf("LeaseGroups once the bucket refilled = %+v, want the group", gl)
	}
}

// testRateLimitWoken: a queue whose ready tasks wait for its rate bucket
// is woken at the refill by PromoteDue, whose next time is the refill's
// (TimersChanged tells the timer loop it moved earlier); the engine keeps
// no timer of its own.
func testRateLimitWoken(t *testing.T, e *Env) {
	b, n := e.B, e.Notes
	promote := func(now time.Time) time.Time {
		t.Helper()
		next, err := b.PromoteDue(t.Context(), now)
		if err != nil {
			t.Fatalf("PromoteDue: %v", err)
		}
		return next
	}
	setConfig(t, b, "q", broker.QueueConfig{RatePerSecond: 10, RateBurst: 2})
	for range 5 {
		EnqueueOne(t, b, T0, NewTask("q"))
	}
	if next := promote(T0); !next.IsZero() {
		t.Fatalf("PromoteDue with nothing timed = %v, want zero", next)
	}
	drainReady(n)
	n.DrainTimers()
	if got := len(Lease(t, b, "s1", "q", 5, T0, TTL)); got != 2 {
		t.Fatalf("leased %d with a full bucket of 2, want 2", got)
	}
	n.RequireTimers(t, "a lease that emptied the bucket with tasks left")
	refill := at(100 * time.Millisecond)
	if next := promote(at(50 * time.Millisecond)); !next.Equal(refill) {
		t.Fatalf("PromoteDue before the refill asks to run at %v, want the refill at %v", next, refill)
	}
	n.RequireNoReady(t)
	if next := promote(refill); !next.IsZero() {
		t.Fatalf("PromoteDue at the refill asks to run again at %v, want zero", next)
	}
	n.RequireReady(t, "q")
	if got := len(Lease(t, b, "s1", "q", 5, refill, TTL)); got != 1 {
		t.Fatalf("leased %d at the refill, want 1", got)
	}
}

// groupWaitsForTokens sets queue q to 10 tokens a second, a burst of 3 and
// groups of 3, enqueues alone tasks, leases the first 3 of them (the
// bucket is empty at T0) and fires group g of type t, which must wait. It
// returns the group's members.
func groupWaitsForTokens(t *testing.T, b broker.Broker, alone int) []*broker.Task {
	t.Helper()
	setConfig(t, b, "q", broker.QueueConfig{RatePerSecond: 10, RateBurst: 3, Group: broker.GroupPolicy{MaxSize: 3, MaxDelay: time.Hour, GracePeriod: time.Hour}})
	for range alone {
		EnqueueOne(t, b, T0, NewTask("q"))
	}
	if n := len(Lease(t, b, "s1", "q", 3, T0, TTL)); n != 3 {
		t.Fatalf("leased %d with a full bucket of 3, want 3", n)
	}
	return Enqueue(t, b, T0, grouped("q", "g", "t"), grouped("q", "g", "t"), grouped("q", "g", "t")) // fires by size
}

// testRateLimitGroupsNotStarved: tasks leased alone, one per token as the
// tokens come, do not starve a fired group waiting for a token per
// member: once it waits, the bucket fills for it. A hold that no
// LeaseGroups comes back for lapses, and the tasks go again.
func testRateLimitGroupsNotStarved(t *testing.T, b broker.Broker) {
	groupWaitsForTokens(t, b, 20)
	alone := 0
	for step := 1; step <= 10; step++ { // a token every 100ms: a task alone asks first each time
		now := at(time.Duration(step) * 100 * time.Millisecond)
		alone += len(Lease(t, b, "s1", "q", 1, now, TTL))
		if gl := leaseGroups(t, b, "q", 1, now, "t"); len(gl) == 1 {
			if len(gl[0].Leases) != 3 || step > 4 || alone > 1 {
				t.Fatalf("at step %d (%d leased alone before) the group went with %d members; want all 3 by step 4, "+
					"after at most the one task that took step 1's token before the group asked", step, alone, len(gl[0].Leases))
			}
			break
		}
		if step == 10 {
			t.Fatalf("the group never went: tasks leased alone took %d tokens as they came", alone)
		}
	}
	if n := len(Lease(t, b, "s1", "q", 1, at(500*time.Millisecond), TTL)); n != 1 {
		t.Fatalf("leased %d alone once the group went and a token came, want 1", n)
	}

	// A group that waits, then is never asked for again, holds its tokens
	// only for a while.
	Enqueue(t, b, T0, grouped("q", "g", "t"), grouped("q", "g", "t"), grouped("q", "g", "t"))
	if gl := leaseGroups(t, b, "q", 1, at(500*time.Millisecond), "t"); len(gl) != 0 {
		t.Fatalf("LeaseGroups with an empty bucket = %+v, want none", gl)
	}
	if n := len(Lease(t, b, "s1", "q", 1, at(600*time.Millisecond), TTL)); n != 0 {
		t.Fatalf("leased %d alone while the group waits for its tokens, want 0", n)
	}
	if n := len(Lease(t, b, "s1", "q", 3, at(time.Hour), TTL)); n != 3 {
		t.Fatalf("leased %d alone an hour later with nobody asking for the group, want the burst of 3", n)
	}
}

// testRateLimitGroupHoldIsItsOwn: the tokens held for a waiting group are
// not spent on another group either (one of a type the waiting group's
// sessions do not handle): the waiting group goes first, the other next.
func testRateLimitGroupHoldIsItsOwn(t *testing.T, b broker.Broker) {
	groupWaitsForTokens(t, b, 3)
	if gl := leaseGroups(t, b, "q", 1, at(100*time.Millisecond), "t"); len(gl) != 0 {
		t.Fatalf("LeaseGroups with 1 token for 3 members = %+v, want none", gl)
	}
	Enqueue(t, b, T0, grouped("q", "h", "u"), grouped("q", "h", "u"), grouped("q", "h", "u"))
	if gl := leaseGroups(t, b, "q", 1, at(300*time.Millisecond), "u"); len(gl) != 0 {
		t.Fatalf("another group took the tokens held for the waiting one: %+v", gl)
	}
	if gl := leaseGroups(t, b, "q", 1, at(300*time.Millisecond), "t"); len(gl) != 1 || gl[0].Group != "g" {
		t.Fatalf("LeaseGroups for the waiting group once its tokens came = %+v, want group g", gl)
	}
	if gl := leaseGroups(t, b, "q", 1, at(600*time.Millisecond), "u"); len(gl) != 1 || gl[0].Group != "h" {
		t.Fatalf("LeaseGroups for the other group once the bucket refilled = %+v, want group h", gl)
	}
}

// testRateLimitGroupHoldEndsWithGroup: a waiting group whose members all
// leave (canceled here) holds no tokens any more: the tasks leased alone
// take them at once, not once the hold would have lapsed.
func testRateLimitGroupHoldEndsWithGroup(t *testing.T, b broker.Broker) {
	members := groupWaitsForTokens(t, b, 5)
	if gl := leaseGroups(t, b, "q", 1, at(100*time.Millisecond), "t"); len(gl) != 0 {
		t.Fatalf("LeaseGroups with 1 token for 3 members = %+v, want none", gl)
	}
	if n := len(Lease(t, b, "s1", "q", 1, at(100*time.Millisecond), TTL)); n != 0 {
		t.Fatalf("leased %d alone while the group waits for its tokens, want 0", n)
	}
	actOK(t, b, broker.ActionCancel, T0, members[0].ID, members[1].ID)
	if n := len(Lease(t, b, "s1", "q", 1, at(100*time.Millisecond), TTL)); n != 0 {
		t.Fatalf("leased %d alone while one member still waits, want 0", n)
	}
	actOK(t, b, broker.ActionCancel, T0, members[2].ID)
	if n := len(Lease(t, b, "s1", "q", 3, at(200*time.Millisecond), TTL)); n != 2 {
		t.Fatalf("leased %d alone once the group was gone, want the 2 tokens the bucket holds", n)
	}
}

func testConfigPersists(t *testing.T, e *Env) {
	cfg := broker.QueueConfig{ConcurrencyLimit: 2, MaxActive: 7, RatePerSecond: 5, RateBurst: 9,
		Group: broker.GroupPolicy{MaxSize: 3, MaxDelay: time.Minute, GracePeriod: time.Second}}
	setConfig(t, e.B, "q", cfg)
	if info, err := e.B.Queue(t.Context(), "fresh"); err != nil || info.Config != (broker.QueueConfig{}) || info.Name != "fresh" {
		t.Fatalf("Queue of a queue never configured = %+v, %v", info, err)
	}
	b := e.Reopen()
	info, err := b.Queue(t.Context(), "q")
	if err != nil || info.Config != cfg {
		t.Fatalf("after a restart the config is %+v, %v; want %+v", info.Config, err, cfg)
	}
	if q := Queue(t, b, "q"); q.Config != cfg {
		t.Fatalf("Queues shows config %+v", q.Config)
	}
}
