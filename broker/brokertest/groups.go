package brokertest

import (
	"slices"
	"testing"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
)

func groupCases() []testCase {
	return []testCase{
		{name: "FireBySize", fn: testGroupBySize},
		{name: "FireByMaxDelay", fn: testGroupByMaxDelay},
		{name: "FireByGracePeriod", fn: testGroupByGrace},
		{name: "OnlyForItsType", fn: testGroupType},
		{name: "FiringOrderAcrossTypes", fn: testGroupFiringOrder},
		{name: "MembersAnswerAlone", fn: testGroupMembers},
		{name: "LeftMembersSkipped", fn: testGroupLeftMembers},
		{name: "LeftMembersNotCountedForSize", env: testGroupLeftNotCounted},
		{name: "SurviveRestart", env: testGroupRestart},
		{name: "FireByBytes", env: testGroupByBytes},
		{name: "LeftMembersBytesNotCounted", fn: testGroupLeftBytes},
		{name: "DelayFromMembersStillThere", fn: testGroupDelayFromLiveMembers},
		{name: "EmptiedGroupStartsOver", fn: testGroupEmptiedStartsOver},
		{name: "WokenWhenDispatchable", env: testGroupWoken},
		{name: "ExpiredMembersArchived", fn: testGroupExpiredMembers},
		{name: "LargerThanMaxActive", env: testGroupLargerThanCap},
		{name: "WokenWhenMembersLeave", env: testGroupWokenAsItShrinks},
		{name: "DeletedMemberIDUsedAgain", fn: testGroupDeletedMemberIDReused},
		{name: "PolicyChangeReachesGatheringGroups", fn: testGroupPolicyChanged},
	}
}

func grouped(queue, name, typ string) broker.NewTask {
	nt := NewTask(queue)
	nt.Group, nt.Type = name, typ
	return nt
}

func policy(t *testing.T, b broker.Broker, queue string, size int32, delay, grace time.Duration) {
	t.Helper()
	setConfig(t, b, queue, broker.QueueConfig{Group: broker.GroupPolicy{MaxSize: size, MaxDelay: delay, GracePeriod: grace}})
}

func readyGroups(b broker.Broker, queue string, types ...string) int {
	counts := []int{-1}
	b.ReadyGroups([]string{queue}, types, counts)
	return counts[0]
}

func leaseGroups(t *testing.T, b broker.Broker, queue string, n int, now time.Time, types ...string) []broker.GroupLease {
	t.Helper()
	gl, err := b.LeaseGroups(t.Context(), broker.GroupLeaseParams{SessionID: "s1", Queue: queue, Types: types, N: n, Now: now, TTL: TTL})
	if err != nil {
		t.Fatalf("LeaseGroups: %v", err)
	}
	return gl
}

func promote(t *testing.T, b broker.Broker, now time.Time) time.Time {
	t.Helper()
	next, err := b.PromoteDue(t.Context(), now)
	if err != nil {
		t.Fatalf("PromoteDue: %v", err)
	}
	return next
}

// testGroupDeletedMemberIDReused: a member deleted from its group leaves
// it; a new task given its id by its producer is a member once, of its
// own group only.
func testGroupDeletedMemberIDReused(t *testing.T, b broker.Broker) {
	policy(t, b, "q", 10, time.Second, time.Hour)
	other := grouped("q", "h", "t")
	other.ID = NewID()
	EnqueueOne(t, b, T0, other)
	actOK(t, b, broker.ActionDelete, T0, other.ID)
	other.Group = "g"
	first := EnqueueOne(t, b, at(500*time.Millisecond), grouped("q", "g", "t"))
	nt := grouped("q", "g", "t")
	nt.ID = NewID()
	EnqueueOne(t, b, at(500*time.Millisecond), nt)
	actOK(t, b, broker.ActionDelete, at(500*time.Millisecond), nt.ID)
	EnqueueOne(t, b, at(500*time.Millisecond), nt)    // the same id again, in the same group
	EnqueueOne(t, b, at(500*time.Millisecond), other) // an id first used in group h
	gs, err := b.Groups(t.Context(), "q")
	if err != nil {
		t.Fatal(err)
	}
	if len(gs) != 1 || gs[0].Group != "g" || gs[0].Size != 3 {
		t.Fatalf("Groups = %+v, want group g of 3 alone", gs)
	}
	promote(t, b, at(1200*time.Millisecond)) // h's time, not g's
	if gl := leaseGroups(t, b, "q", 5, at(1200*time.Millisecond), "t"); len(gl) != 0 {
		t.Fatalf("LeaseGroups = %+v before g's time, want none", gl)
	}
	promote(t, b, at(2*time.Second))
	gl := leaseGroups(t, b, "q", 5, at(2*time.Second), "t")
	if len(gl) != 1 || gl[0].Group != "g" {
		t.Fatalf("LeaseGroups = %+v, want one batch of group g", gl)
	}
	var got []string
	for _, l := range gl[0].Leases {
		got = append(got, l.Task.ID)
	}
	if want := []string{first.ID, nt.ID, other.ID}; len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("the batch leases %v, want %v (each member once)", got, want)
	}
}

func testGroupBySize(t *testing.T, b broker.Broker) {
	policy(t, b, "q", 3, time.Hour, time.Hour)
	ts := Enqueue(t, b, T0, grouped("q", "g", "t"), grouped("q", "g", "t"))
	if n := readyGroups(b, "q", "t"); n != 0 {
		t.Fatalf("ReadyGroups = %d with 2 of 3 members", n)
	}
	ts = append(ts, EnqueueOne(t, b, at(time.Second), grouped("q", "g", "t")))
	if n := readyGroups(b, "q", "t"); n != 1 {
		t.Fatalf("ReadyGroups = %d once the group holds 3, want 1", n)
	}
	gl := leaseGroups(t, b, "q", 5, at(2*time.Second), "t")
	if len(gl) != 1 || len(gl[0].Leases) != 3 || gl[0].Group != "g" || gl[0].Type != "t" {
		t.Fatalf("LeaseGroups = %+v, want one batch of 3", gl)
	}
	for i, l := range gl[0].Leases {
		if l.Task.ID != ts[i].ID || !l.Expiry.Equal(at(2*time.Second).Add(TTL)) || l.Task.Type != "t" {
			t.Fatalf("member %d = %s expiring %v, want %s at the shared expiry", i, l.Task.ID, l.Expiry, ts[i].ID)
		}
		RequireState(t, b, l.Task.ID, active)
	}
	// A new member starts a new group.
	EnqueueOne(t, b, at(3*time.Second), grouped("q", "g", "t"))
	if n := readyGroups(b, "q", "t"); n != 0 {
		t.Fatalf("ReadyGroups = %d after the batch left", n)
	}
	RequireCounts(t, b, "q", Counts{active: 3, aggregating: 1})
}

func testGroupByMaxDelay(t *testing.T, b broker.Broker) {
	policy(t, b, "q", 100, time.Minute, time.Hour)
	EnqueueOne(t, b, T0, grouped("q", "g", "t"))
	EnqueueOne(t, b, at(30*time.Second), grouped("q", "g", "t"))
	if next := promote(t, b, at(59*time.Second)); !next.Equal(at(time.Minute)) {
		t.Fatalf("PromoteDue next = %v, want the group's max delay at T0+1m", next)
	}
	if n := readyGroups(b, "q", "t"); n != 0 {
		t.Fatalf("fired before its max delay")
	}
	promote(t, b, at(time.Minute))
	gl := leaseGroups(t, b, "q", 1, at(2*time.Minute), "t")
	if len(gl) != 1 || len(gl[0].Leases) != 2 {
		t.Fatalf("LeaseGroups = %+v after the max delay, want the 2 members", gl)
	}
	for _, l := range gl[0].Leases {
		if !l.Task.NextProcessAt.Equal(at(time.Minute)) {
			t.Fatalf("member %s ready at %v, want when its group fired (T0+1m)", l.Task.ID, l.Task.NextProcessAt)
		}
	}
}

func testGroupByGrace(t *testing.T, b broker.Broker) {
	policy(t, b, "q", 100, time.Hour, 10*time.Second)
	EnqueueOne(t, b, T0, grouped("q", "g", "t"))
	EnqueueOne(t, b, at(5*time.Second), grouped("q", "g", "t"))
	if next := promote(t, b, at(14*time.Second)); !next.Equal(at(15 * time.Second)) {
		t.Fatalf("PromoteDue next = %v, want the grace period after the latest member (T0+15s)", next)
	}
	promote(t, b, at(15*time.Second))
	if n := readyGroups(b, "q", "t"); n != 1 {
		t.Fatalf("ReadyGroups = %d after the grace period, want 1", n)
	}
	gs, err := b.Groups(t.Context(), "q")
	if err != nil || len(gs) != 1 || !gs[0].Fired || gs[0].Size != 2 || !gs[0].First.Equal(T0) || !gs[0].Last.Equal(at(5*time.Second)) {
		t.Fatalf("Groups = %+v, %v", gs, err)
	}
}

// testGroupFiringOrder: a session of several types leases the fired
// groups of its types oldest first, across the types, and a group larger
// than the queue's cap goes in parts, keeping its place in line.
func testGroupFiringOrder(t *testing.T, b broker.Broker) {
	policy(t, b, "q", 2, time.Second, time.Hour)
	// Fired by size, in this order: a1 (a, 2 members), b1, c1 (a type the
	// session does not take), a2, b2 (one member each, by time).
	fire := []struct{ name, typ string }{{"a1", "a"}, {"b1", "b"}, {"c1", "c"}}
	for _, f := range fire {
		Enqueue(t, b, T0, grouped("q", f.name, f.typ), grouped("q", f.name, f.typ))
	}
	EnqueueOne(t, b, T0, grouped("q", "a2", "a"))
	promote(t, b, at(1500*time.Millisecond))
	EnqueueOne(t, b, at(1500*time.Millisecond), grouped("q", "b2", "b"))
	promote(t, b, at(3*time.Second))
	if n := readyGroups(b, "q", "a", "b"); n != 4 {
		t.Fatalf("ReadyGroups(a, b) = %d, want 4", n)
	}
	setConfig(t, b, "q", broker.QueueConfig{MaxActive: 1, Group: broker.GroupPolicy{MaxSize: 2, MaxDelay: time.Second, GracePeriod: time.Hour}})
	// Under a cap of 1, a1 and b1 (2 members each) go in parts of the cap.
	var got []string
	for range 6 {
		gl := leaseGroups(t, b, "q", 1, at(3*time.Second), "b", "a")
		if len(gl) != 1 {
			t.Fatalf("LeaseGroups = %+v after %v, want one batch", gl, got)
		}
		got = append(got, gl[0].Group)
		for _, l := range gl[0].Leases {
			Succeed(t, b, "s1", l, at(3*time.Second))
		}
	}
	if want := []string{"a1", "a1", "b1", "b1", "a2", "b2"}; !slices.Equal(got, want) {
		t.Fatalf("batches left in the order %v, want %v", got, want)
	}
	if n := readyGroups(b, "q", "c"); n != 1 {
		t.Fatalf("ReadyGroups(c) = %d, want c1 still waiting", n)
	}
}

func testGroupType(t *testing.T, b broker.Broker) {
	policy(t, b, "q", 1, time.Hour, time.Hour)
	EnqueueOne(t, b, T0, grouped("q", "g", "a"))
	EnqueueOne(t, b, T0, grouped("q", "g", "b"))
	if n := readyGroups(b, "q", "a"); n != 1 {
		t.Fatalf("ReadyGroups(a) = %d", n)
	}
	if n := readyGroups(b, "q", "c"); n != 0 {
		t.Fatalf("ReadyGroups(c) = %d: no group of that type", n)
	}
	if gl := leaseGroups(t, b, "q", 5, T0, "c"); len(gl) != 0 {
		t.Fatalf("leased %v for a type with no group", gl)
	}
	// A group nobody handles waits, listed, and is never dropped.
	gl := leaseGroups(t, b, "q", 5, T0, "a")
	if len(gl) != 1 || gl[0].Type != "a" {
		t.Fatalf("LeaseGroups(a) = %+v", gl)
	}
	gs, err := b.Groups(t.Context(), "")
	if err != nil || len(gs) != 1 || gs[0].Type != "b" || !gs[0].Fired {
		t.Fatalf("Groups = %+v, %v; want the b group waiting", gs, err)
	}
	if _, err := b.SetQueuePaused(t.Context(), "q", true); err != nil {
		t.Fatal(err)
	}
	if n := readyGroups(b, "q", "b"); n != 0 {
		t.Fatalf("ReadyGroups = %d on a paused queue", n)
	}
}

func testGroupMembers(t *testing.T, b broker.Broker) {
	policy(t, b, "q", 3, time.Hour, time.Hour)
	Enqueue(t, b, T0, grouped("q", "g", "t"), grouped("q", "g", "t"), grouped("q", "g", "t"))
	ls := leaseGroups(t, b, "q", 1, T0, "t")[0].Leases
	Succeed(t, b, "s1", ls[0], T0)
	Fail(t, b, "s1", ls[1], "flaky", T0, T0)
	Decide(t, b, broker.Released("s1", Ref(ls[2]), T0))
	RequireState(t, b, ls[0].Task.ID, completed)
	// Retried and released members come back alone, as plain tasks.
	plain := Lease(t, b, "s2", "q", 10, T0, TTL)
	if len(plain) != 2 {
		t.Fatalf("leased %d members alone, want the failed and the released one", len(plain))
	}
	if n := readyGroups(b, "q", "t"); n != 0 {
		t.Fatalf("a member was aggregated again")
	}
}

func testGroupLeftMembers(t *testing.T, b broker.Broker) {
	policy(t, b, "q", 3, time.Hour, time.Hour)
	ts := Enqueue(t, b, T0, grouped("q", "g", "t"), grouped("q", "g", "t"), grouped("q", "g", "t"))
	actOK(t, b, broker.ActionCancel, T0, ts[1].ID)
	gl := leaseGroups(t, b, "q", 1, T0, "t")
	if len(gl) != 1 || len(gl[0].Leases) != 2 {
		t.Fatalf("LeaseGroups = %+v, want the 2 members left", gl)
	}
}

// testGroupLeftNotCounted: a group fires by size when it holds
// MaxSize members: one that left (canceled, deleted) is not held, before
// a restart as after.
func testGroupLeftNotCounted(t *testing.T, e *Env) {
	policy(t, e.B, "q", 3, time.Hour, time.Hour)
	ts := Enqueue(t, e.B, T0, grouped("q", "g", "t"), grouped("q", "g", "t"))
	actOK(t, e.B, broker.ActionCancel, T0, ts[1].ID)
	EnqueueOne(t, e.B, T0, grouped("q", "g", "t"))
	if n := readyGroups(e.B, "q", "t"); n != 0 {
		t.Fatalf("ReadyGroups = %d with 2 of 3 members (and one canceled)", n)
	}
	b := e.Reopen()
	if n := readyGroups(b, "q", "t"); n != 0 {
		t.Fatalf("ReadyGroups after a restart = %d with 2 of 3 members", n)
	}
	EnqueueOne(t, b, T0, grouped("q", "g", "t"))
	gl := leaseGroups(t, b, "q", 1, T0, "t")
	if len(gl) != 1 || len(gl[0].Leases) != 3 {
		t.Fatalf("LeaseGroups = %+v, want the 3 members", gl)
	}
}

func testGroupRestart(t *testing.T, e *Env) {
	policy(t, e.B, "q", 100, time.Minute, time.Hour)
	ts := Enqueue(t, e.B, T0, grouped("q", "g", "t"), grouped("q", "g", "t"))
	b := e.Reopen()
	gs, err := b.Groups(t.Context(), "q")
	if err != nil || len(gs) != 1 || gs[0].Size != 2 || gs[0].Fired {
		t.Fatalf("Groups after a restart = %+v, %v", gs, err)
	}
	promote(t, b, at(time.Minute))
	gl := leaseGroups(t, b, "q", 1, at(time.Minute), "t")
	if len(gl) != 1 || len(gl[0].Leases) != 2 || gl[0].Leases[0].Task.ID != ts[0].ID {
		t.Fatalf("LeaseGroups after a restart = %+v", gl)
	}
}

// testGroupByBytes fills a group with members of 1 MiB under a policy
// that would let it gather a hundred: it fires at broker.MaxGroupBytes (16
// members), the next member starts a new group, and a group's bytes are
// counted again after a restart.
func testGroupByBytes(t *testing.T, e *Env) {
	policy(t, e.B, "q", 100, time.Hour, time.Hour)
	member := func() broker.NewTask {
		nt := grouped("q", "g", "t")
		nt.Payload = make([]byte, 1<<20)
		return nt
	}
	perGroup := broker.MaxGroupBytes >> 20
	for range perGroup - 1 {
		EnqueueOne(t, e.B, T0, member())
	}
	if n := readyGroups(e.B, "q", "t"); n != 0 {
		t.Fatalf("ReadyGroups = %d with %d MiB of members", n, perGroup-1)
	}
	b := e.Reopen()
	EnqueueOne(t, b, T0, member())
	if n := readyGroups(b, "q", "t"); n != 1 {
		t.Fatalf("ReadyGroups = %d once the members reach %d MiB, want 1", n, perGroup)
	}
	EnqueueOne(t, b, T0, member())
	gl := leaseGroups(t, b, "q", 5, T0, "t")
	var sizes []int
	for _, g := range gl {
		sizes = append(sizes, len(g.Leases))
	}
	if len(sizes) != 1 || sizes[0] != perGroup {
		t.Fatalf("LeaseGroups: batches of %v members, want one of %d", sizes, perGroup)
	}
	gs, err := b.Groups(t.Context(), "q")
	if err != nil || len(gs) != 1 || gs[0].Size != 1 || gs[0].Fired {
		t.Fatalf("Groups after the batch left = %+v, %v; want the last member gathering alone", gs, err)
	}
}

// testGroupLeftBytes: the members that left a group take their bytes
// with them: two members of 600 KiB do not fire a group on its 16 MiB
// bound after fifteen of 1 MiB were canceled.
func testGroupLeftBytes(t *testing.T, b broker.Broker) {
	policy(t, b, "q", 100, time.Hour, time.Hour)
	member := func(size int) broker.NewTask {
		nt := grouped("q", "g", "t")
		nt.Payload = make([]byte, size)
		return nt
	}
	EnqueueOne(t, b, T0, member(10))
	var big []string
	for range broker.MaxGroupBytes>>20 - 1 {
		big = append(big, EnqueueOne(t, b, T0, member(1<<20)).ID)
	}
	actOK(t, b, broker.ActionCancel, T0, big...)
	EnqueueOne(t, b, T0, member(600<<10))
	EnqueueOne(t, b, T0, member(600<<10))
	if n := readyGroups(b, "q", "t"); n != 0 {
		t.Fatalf("ReadyGroups = %d with 3 members of 1.2 MiB in all (and %d MiB canceled), want 0", n, len(big))
	}
	gs, err := b.Groups(t.Context(), "q")
	if err != nil || len(gs) != 1 || gs[0].Size != 3 || gs[0].Fired {
		t.Fatalf("Groups = %+v, %v; want one group of 3 gathering", gs, err)
	}
}

// testGroupDelayFromLiveMembers: a group's max delay counts from its
// oldest member still there, not from one that was canceled.
func testGroupDelayFromLiveMembers(t *testing.T, b broker.Broker) {
	policy(t, b, "q", 100, 30*time.Second, time.Hour)
	first := EnqueueOne(t, b, T0, grouped("q", "g", "t"))
	EnqueueOne(t, b, at(20*time.Second), grouped("q", "g", "t"))
	actOK(t, b, broker.ActionCancel, at(20*time.Second), first.ID)
	gs, err := b.Groups(t.Context(), "q")
	if err != nil || len(gs) != 1 || !gs[0].First.Equal(at(20*time.Second)) || !gs[0].FiresAt.Equal(at(50*time.Second)) {
		t.Fatalf("Groups = %+v, %v; want first at T0+20s, firing at T0+50s", gs, err)
	}
	if next := promote(t, b, at(31*time.Second)); !next.Equal(at(50 * time.Second)) {
		t.Fatalf("PromoteDue next = %v, want T0+50s, 30s after the member still there", next)
	}
	if n := readyGroups(b, "q", "t"); n != 0 {
		t.Fatalf("fired 30s after a canceled member")
	}
	promote(t, b, at(50*time.Second))
	if n := readyGroups(b, "q", "t"); n != 1 {
		t.Fatalf("ReadyGroups = %d 30s after the member still there, want 1", n)
	}
}

// testGroupEmptiedStartsOver: a group whose every member left is gone:
// the next member starts a new one, timed from it.
func testGroupEmptiedStartsOver(t *testing.T, b broker.Broker) {
	policy(t, b, "q", 100, 30*time.Second, time.Hour)
	first := EnqueueOne(t, b, T0, grouped("q", "g", "t"))
	actOK(t, b, broker.ActionDelete, at(10*time.Second), first.ID)
	EnqueueOne(t, b, at(25*time.Second), grouped("q", "g", "t"))
	promote(t, b, at(31*time.Second))
	if n := readyGroups(b, "q", "t"); n != 0 {
		t.Fatalf("fired 30s after a deleted member, in a group that had none left")
	}
	promote(t, b, at(55*time.Second))
	if n := readyGroups(b, "q", "t"); n != 1 {
		t.Fatalf("ReadyGroups = %d 30s after the new member, want 1", n)
	}
}

// drainReady forgets the TasksReady signals queued so far.
func drainReady(n *Notes) {
	for len(n.ready) > 0 {
		<-n.ready
	}
}

// testGroupWoken: a fired group that could not be leased (its queue
// paused, or too little room under max_active for its members) signals
// TasksReady once it can be: sessions sleep until told.
func testGroupWoken(t *testing.T, e *Env) {
	b := e.B
	group := broker.GroupPolicy{MaxSize: 2, MaxDelay: time.Hour, GracePeriod: time.Hour}
	setConfig(t, b, "paused", broker.QueueConfig{Group: group})
	if _, err := b.SetQueuePaused(t.Context(), "paused", true); err != nil {
		t.Fatal(err)
	}
	Enqueue(t, b, T0, grouped("paused", "g", "t"), grouped("paused", "g", "t")) // fires while paused
	drainReady(e.Notes)
	if _, err := b.SetQueuePaused(t.Context(), "paused", false); err != nil {
		t.Fatal(err)
	}
	e.Notes.RequireReady(t, "paused")
	if gl := leaseGroups(t, b, "paused", 1, T0, "t"); len(gl) != 1 || len(gl[0].Leases) != 2 {
		t.Fatalf("LeaseGroups after the resume = %+v, want the group of 2", gl)
	}

	setConfig(t, b, "capped", broker.QueueConfig{MaxActive: 3, Group: group})
	Enqueue(t, b, T0, NewTask("capped"), NewTask("capped"), NewTask("capped"))
	ls := Lease(t, b, "s1", "capped", 3, T0, TTL)
	if len(ls) != 3 {
		t.Fatalf("leased %d, want 3 up to the cap", len(ls))
	}
	Enqueue(t, b, T0, grouped("capped", "g", "t"), grouped("capped", "g", "t"))
	if gl := leaseGroups(t, b, "capped", 1, T0, "t"); len(gl) != 0 {
		t.Fatalf("LeaseGroups = %+v with the cap full", gl)
	}
	Succeed(t, b, "s1", ls[0], T0) // room for one: not for the group of 2
	drainReady(e.Notes)
	if gl := leaseGroups(t, b, "capped", 1, T0, "t"); len(gl) != 0 {
		t.Fatalf("LeaseGroups = %+v with room for 1 of its 2 members", gl)
	}
	Succeed(t, b, "s1", ls[1], T0) // room for both
	e.Notes.RequireReady(t, "capped")
	if gl := leaseGroups(t, b, "capped", 1, T0, "t"); len(gl) != 1 || len(gl[0].Leases) != 2 {
		t.Fatalf("LeaseGroups with room for the group = %+v, want the group of 2", gl)
	}
}

// testGroupExpiredMembers: a member whose deadline or expiry passed while
// its fired group waited is archived when the group is leased, as Lease
// archives such a task (whether or not PromoteDue ran since); a group
// left with no member is dropped, never sent as an empty batch.
func testGroupExpiredMembers(t *testing.T, b broker.Broker) {
	policy(t, b, "q", 3, time.Hour, time.Hour)
	late := grouped("q", "g", "t")
	late.Deadline = at(time.Second)
	stale := grouped("q", "g", "t")
	stale.ExpiresAt = at(time.Second)
	ts := Enqueue(t, b, T0, late, stale, grouped("q", "g", "t")) // fires by size
	gl := leaseGroups(t, b, "q", 5, at(time.Minute), "t")
	if len(gl) != 1 || len(gl[0].Leases) != 1 || gl[0].Leases[0].Task.ID != ts[2].ID {
		t.Fatalf("LeaseGroups a minute on = %+v, want one batch of the one member still in time", gl)
	}
	if got := RequireState(t, b, ts[0].ID, archived); got.LastError != broker.DeadlinePassedMessage {
		t.Fatalf("member past its deadline: last error %q, want %q", got.LastError, broker.DeadlinePassedMessage)
	}
	if got := RequireState(t, b, ts[1].ID, archived); got.LastError != broker.ExpiredMessage {
		t.Fatalf("member past its expiry: last error %q, want %q", got.LastError, broker.ExpiredMessage)
	}

	for range 3 {
		EnqueueOne(t, b, T0, late)
	}
	if gl := leaseGroups(t, b, "q", 5, at(time.Minute), "t"); len(gl) != 0 {
		t.Fatalf("LeaseGroups = %+v for a group whose every member is past its deadline, want none", gl)
	}
	if n := readyGroups(b, "q", "t"); n != 0 {
		t.Fatalf("ReadyGroups = %d once the group's last member left, want 0", n)
	}
	RequireCounts(t, b, "q", Counts{active: 1, archived: 5})
}

// testGroupLargerThanCap: a fired group with more members than the
// queue's max_active could never go whole; it goes in batches of the cap,
// in member order, each once the queue has room for it (the sessions are
// woken then), and none passes the cap.
func testGroupLargerThanCap(t *testing.T, e *Env) {
	b := e.B
	setConfig(t, b, "q", broker.QueueConfig{MaxActive: 2, Group: broker.GroupPolicy{MaxSize: 5, MaxDelay: time.Hour, GracePeriod: time.Hour}})
	var members []broker.NewTask
	for range 5 {
		members = append(members, grouped("q", "g", "t"))
	}
	ts := Enqueue(t, b, T0, members...) // fires by size
	var got []string
	batch := func(want int) []broker.Lease {
		t.Helper()
		gl := leaseGroups(t, b, "q", 5, T0, "t")
		if len(gl) != 1 || len(gl[0].Leases) != want {
			t.Fatalf("LeaseGroups = %+v, want one batch of %d", gl, want)
		}
		for _, l := range gl[0].Leases {
			got = append(got, l.Task.ID)
		}
		return gl[0].Leases
	}
	first := batch(2)
	if gl := leaseGroups(t, b, "q", 5, T0, "t"); len(gl) != 0 || readyGroups(b, "q", "t") != 1 {
		t.Fatalf("with the cap full: LeaseGroups = %+v, ReadyGroups %d; want none leased, the rest waiting", gl, readyGroups(b, "q", "t"))
	}
	Succeed(t, b, "s1", first[0], T0) // room for 1 of the next 2
	drainReady(e.Notes)
	if gl := leaseGroups(t, b, "q", 5, T0, "t"); len(gl) != 0 {
		t.Fatalf("LeaseGroups = %+v with room for one, want the next batch of 2 to wait", gl)
	}
	Succeed(t, b, "s1", first[1], T0)
	e.Notes.RequireReady(t, "q")
	second := batch(2)
	for _, l := range second {
		Succeed(t, b, "s1", l, T0)
	}
	batch(1)
	if n := readyGroups(b, "q", "t"); n != 0 {
		t.Fatalf("ReadyGroups = %d after the last part left", n)
	}
	for i, id := range got {
		if id != ts[i].ID {
			t.Fatalf("members went as %v, want in member order %v", got, ts)
		}
	}
}

// testGroupWokenAsItShrinks: a fired group waiting for room under
// max_active wakes the sessions once it fits, whether the room grew past
// what it needs or its need shrank (members canceled) with no task
// leaving ACTIVE after.
func testGroupWokenAsItShrinks(t *testing.T, e *Env) {
	b := e.B
	setConfig(t, b, "q", broker.QueueConfig{MaxActive: 4, Group: broker.GroupPolicy{MaxSize: 4, MaxDelay: time.Hour, GracePeriod: time.Hour}})
	Enqueue(t, b, T0, NewTask("q"), NewTask("q"), NewTask("q"), NewTask("q"))
	running := Lease(t, b, "s1", "q", 4, T0, TTL)
	members := Enqueue(t, b, T0, grouped("q", "g", "t"), grouped("q", "g", "t"), grouped("q", "g", "t"), grouped("q", "g", "t"))
	Succeed(t, b, "s1", running[0], T0)
	Succeed(t, b, "s1", running[1], T0) // room 2 of the 4 it needs
	drainReady(e.Notes)
	actOK(t, b, broker.ActionCancel, T0, members[0].ID, members[1].ID) // it needs 2 now: it fits
	e.Notes.RequireReady(t, "q")
	if gl := leaseGroups(t, b, "q", 1, T0, "t"); len(gl) != 1 || len(gl[0].Leases) != 2 {
		t.Fatalf("LeaseGroups once the group fits = %+v, want its 2 members", gl)
	}

	// Four ACTIVE again (two plain, the batch of two): a group of four
	// waits with no room at all.
	more := Enqueue(t, b, T0, grouped("q", "h", "t"), grouped("q", "h", "t"), grouped("q", "h", "t"), grouped("q", "h", "t"))
	drainReady(e.Notes)
	Succeed(t, b, "s1", running[2], T0) // room 1
	e.Notes.RequireNoReady(t)
	actOK(t, b, broker.ActionCancel, T0, more[0].ID, more[1].ID, more[2].ID) // it needs 1 now
	e.Notes.RequireReady(t, "q")
	Succeed(t, b, "s1", running[3], T0) // room 2, past its need: still woken
	e.Notes.RequireReady(t, "q")
	if gl := leaseGroups(t, b, "q", 1, T0, "t"); len(gl) != 1 || len(gl[0].Leases) != 1 {
		t.Fatalf("LeaseGroups = %+v, want the group's one member left", gl)
	}
}

// testGroupPolicyChanged: a queue's new group policy applies to the groups
// already gathering, not only to those that start after it: a lower size
// fires a group that holds that many, a shorter delay moves a group's time
// (earlier or later), a delay already past fires it at the next PromoteDue.
func testGroupPolicyChanged(t *testing.T, b broker.Broker) {
	policy(t, b, "q", 100, time.Hour, time.Hour)
	Enqueue(t, b, T0, grouped("q", "big", "t"), grouped("q", "big", "t"), grouped("q", "big", "t"))
	EnqueueOne(t, b, T0, grouped("q", "slow", "t"))
	if next := promote(t, b, at(time.Second)); !next.Equal(at(time.Hour)) {
		t.Fatalf("PromoteDue next = %v, want T0+1h under the first policy", next)
	}
	policy(t, b, "q", 3, 10*time.Minute, time.Hour)
	next := promote(t, b, at(2*time.Second))
	if n := readyGroups(b, "q", "t"); n != 1 {
		t.Fatalf("ReadyGroups = %d once the size is lowered to the 3 members a group holds, want 1", n)
	}
	if !next.Equal(at(10 * time.Minute)) {
		t.Fatalf("PromoteDue next = %v, want the shorter delay's T0+10m for the group left", next)
	}
	if gl := leaseGroups(t, b, "q", 5, at(2*time.Second), "t"); len(gl) != 1 || gl[0].Group != "big" || len(gl[0].Leases) != 3 {
		t.Fatalf("LeaseGroups = %+v, want the 3 members of big", gl)
	}
	policy(t, b, "q", 3, 2*time.Hour, time.Hour)
	if next := promote(t, b, at(11*time.Minute)); !next.Equal(at(time.Hour)) || readyGroups(b, "q", "t") != 0 {
		t.Fatalf("PromoteDue next = %v with %d ready, want slow still gathering until its grace at T0+1h",
			next, readyGroups(b, "q", "t"))
	}
	policy(t, b, "q", 3, time.Minute, time.Hour)
	promote(t, b, at(12*time.Minute))
	if gl := leaseGroups(t, b, "q", 5, at(12*time.Minute), "t"); len(gl) != 1 || gl[0].Group != "slow" || len(gl[0].Leases) != 1 {
		t.Fatalf("LeaseGroups = %+v, want slow, whose new delay had passed", gl)
	}
}
