package brokertest

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
)

func leaseCases() []testCase {
	return []testCase{
		{name: "PriorityThenFIFO", fn: testLeasePriority},
		{name: "Fields", fn: testLeaseFields},
		{name: "Limit", fn: testLeaseLimit},
		{name: "LimitFunc", fn: testLeaseLimitFunc},
		{name: "Ready", fn: testLeaseReady},
		{name: "PausedQueue", fn: testLeasePaused},
		{name: "ConcurrentSessions", fn: testLeaseConcurrent},
		{name: "ScheduledAfterPromote", fn: testLeaseScheduled},
		{name: "ReadySince", fn: testLeaseReadySince},
	}
}

func testLeasePriority(t *testing.T, b broker.Broker) {
	prios := []int32{1, 5, 9, 5, 1, 9, 4}
	ids := make([]string, len(prios))
	for i, p := range prios {
		nt := NewTask("q")
		nt.Priority = p
		nt.Type = fmt.Sprintf("t%d", i)
		ids[i] = EnqueueOne(t, b, T0, nt).ID
	}
	if n := Ready(b, "q"); n != len(prios) {
		t.Fatalf("Ready = %d, want %d", n, len(prios))
	}
	// Highest priority first, and within a priority in enqueue order.
	wantOrder := []int{2, 5, 1, 3, 6, 0, 4}
	var got []int
	for range prios {
		l := LeaseOne(t, b, "s1", "q", T0)
		got = append(got, slices.Index(ids, l.Task.ID))
		if l.Task.Priority != prios[got[len(got)-1]] {
			t.Fatalf("leased task has priority %d, want %d", l.Task.Priority, prios[got[len(got)-1]])
		}
	}
	if !slices.Equal(got, wantOrder) {
		t.Fatalf("lease order %v, want %v (by priority, then FIFO)", got, wantOrder)
	}

	// The same order when one Lease call takes them all.
	for i, p := range prios {
		nt := NewTask("bulk")
		nt.Priority = p
		ids[i] = EnqueueOne(t, b, T0, nt).ID
	}
	ls := Lease(t, b, "s1", "bulk", 100, T0, TTL)
	got = got[:0]
	for _, l := range ls {
		got = append(got, slices.Index(ids, l.Task.ID))
	}
	if !slices.Equal(got, wantOrder) {
		t.Fatalf("bulk lease order %v, want %v", got, wantOrder)
	}
}

func testLeaseFields(t *testing.T, b broker.Broker) {
	nt := NewTask("q")
	nt.Type = "fields"
	nt.Payload = []byte("payload")
	nt.Metadata = map[string]string{"a": "b"}
	nt.MaxRetry = 7
	nt.Priority = 6
	task := EnqueueOne(t, b, T0, nt)

	now := at(time.Second)
	ls := Lease(t, b, "s1", "q", 1, now, 45*time.Second)
	if len(ls) != 1 {
		t.Fatalf("Lease got %d tasks, want 1", len(ls))
	}
	l := ls[0]
	if l.Token == 0 {
		t.Fatalf("lease token is 0")
	}
	if !l.Expiry.Equal(now.Add(45 * time.Second)) {
		t.Fatalf("lease Expiry = %v, want %v", l.Expiry, now.Add(45*time.Second))
	}
	lt := l.Task
	if lt.ID != task.ID || lt.Queue != "q" || lt.Type != "fields" || string(lt.Payload) != "payload" ||
		lt.ContentType != nt.ContentType || lt.Metadata["a"] != "b" || lt.State != active ||
		lt.Priority != 6 || lt.MaxRetry != 7 || lt.Retried != 0 {
		t.Fatalf("leased task = %+v", lt)
	}
	stored := RequireState(t, b, task.ID, active)
	if !stored.StartedAt.Equal(now) {
		t.Fatalf("StartedAt = %v, want %v", stored.StartedAt, now)
	}
	RequireCounts(t, b, "q", Counts{active: 1})
	if n := Ready(b, "q"); n != 0 {
		t.Fatalf("Ready = %d after leasing the only task", n)
	}
}

func testLeaseLimit(t *testing.T, b broker.Broker) {
	for range 10 {
		EnqueueOne(t, b, T0, NewTask("q1"))
	}
	for range 3 {
		EnqueueOne(t, b, T0, NewTask("q2"))
	}
	if ls := Lease(t, b, "s1", "q1", 0, T0, TTL); len(ls) != 0 {
		t.Fatalf("Lease with N=0 got %d tasks", len(ls))
	}
	if ls := Lease(t, b, "s1", "nope", 5, T0, TTL); len(ls) != 0 {
		t.Fatalf("Lease from an unknown queue got %d tasks", len(ls))
	}
	ls, err := b.Lease(t.Context(), broker.LeaseParams{
		SessionID: "s1",
		Picks:     []broker.QueuePick{{Queue: "q1", N: 4}, {Queue: "q2", N: 5}, {Queue: "q1", N: 0}},
		Now:       T0,
		TTL:       TTL,
	})
	if err != nil {
		t.Fatal(err)
	}
	var fromQ1, fromQ2 int
	for i, l := range ls {
		switch l.Task.Queue {
		case "q1":
			fromQ1++
			if fromQ2 > 0 {
				t.Fatalf("leases[%d] is from q1 after q2's: picks are served in order", i)
			}
		case "q2":
			fromQ2++
		default:
			t.Fatalf("leased a task of queue %q", l.Task.Queue)
		}
	}
	if fromQ1 != 4 || fromQ2 != 3 {
		t.Fatalf("leased %d from q1 and %d from q2, want 4 and 3", fromQ1, fromQ2)
	}
	if n1, n2 := Ready(b, "q1"), Ready(b, "q2"); n1 != 6 || n2 != 0 {
		t.Fatalf("Ready q1=%d q2=%d, want 6 and 0", n1, n2)
	}
	if ls := Lease(t, b, "s2", "q1", 100, T0, TTL); len(ls) != 6 {
		t.Fatalf("Lease got %d of the 6 left", len(ls))
	}
}

func testLeaseReady(t *testing.T, b broker.Broker) {
	for range 3 {
		EnqueueOne(t, b, T0, NewTask("a"))
	}
	EnqueueOne(t, b, T0, NewTask("b"))
	counts := []int{-1, -1, -1, -1}
	b.Ready([]string{"b", "nope", "a", "a"}, counts)
	if !slices.Equal(counts, []int{1, 0, 3, 3}) {
		t.Fatalf("Ready = %v, want [1 0 3 3]", counts)
	}
	LeaseOne(t, b, "s1", "a", T0)
	if n := Ready(b, "a"); n != 2 {
		t.Fatalf("Ready after a lease = %d, want 2", n)
	}
}

func testLeasePaused(t *testing.T, b broker.Broker) {
	for range 3 {
		EnqueueOne(t, b, T0, NewTask("q"))
	}
	info, err := b.SetQueuePaused(t.Context(), "q", true)
	if err != nil {
		t.Fatal(err)
	}
	if !info.Paused || info.Name != "q" {
		t.Fatalf("SetQueuePaused returned %+v", info)
	}
	if !Queue(t, b, "q").Paused {
		t.Fatalf("Queues does not show q paused")
	}
	if n := Ready(b, "q"); n != 0 {
		t.Fatalf("Ready of a paused queue = %d", n)
	}
	if ls := Lease(t, b, "s1", "q", 10, T0, TTL); len(ls) != 0 {
		t.Fatalf("leased %d tasks from a paused queue", len(ls))
	}
	EnqueueOne(t, b, T0, NewTask("q"))
	if n := Ready(b, "q"); n != 0 {
		t.Fatalf("Ready of a paused queue = %d after an enqueue", n)
	}
	RequireCounts(t, b, "q", Counts{pending: 4})

	// Pausing an unknown queue creates it paused.
	if info, err := b.SetQueuePaused(t.Context(), "fresh", true); err != nil || !info.Paused {
		t.Fatalf("SetQueuePaused(fresh) = %+v, %v", info, err)
	}
	EnqueueOne(t, b, T0, NewTask("fresh"))
	if n := Ready(b, "fresh"); n != 0 {
		t.Fatalf("Ready of a queue paused before its first task = %d", n)
	}

	info, err = b.SetQueuePaused(t.Context(), "q", false)
	if err != nil || info.Paused {
		t.Fatalf("resume returned %+v, %v", info, err)
	}
	if n := Ready(b, "q"); n != 4 {
		t.Fatalf("Ready after resume = %d, want 4", n)
	}
	if ls := Lease(t, b, "s1", "q", 10, T0, TTL); len(ls) != 4 {
		t.Fatalf("leased %d tasks after resume, want 4", len(ls))
	}
	if Queue(t, b, "q").Paused {
		t.Fatalf("Queues still shows q paused")
	}
}

func testLeaseConcurrent(t *testing.T, b broker.Broker) {
	const tasks, sessions = 300, 8
	batch := make([]broker.NewTask, tasks)
	for i := range batch {
		batch[i] = NewTask("q")
		batch[i].Priority = int32(i%9 + 1)
	}
	want := map[string]bool{}
	for _, task := range Enqueue(t, b, T0, batch...) {
		want[task.ID] = true
	}

	got := make([][]broker.Lease, sessions)
	errs := make([]error, sessions)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for s := range sessions {
		wg.Go(func() {
			<-start
			for {
				ls, err := b.Lease(t.Context(), broker.LeaseParams{
					SessionID: fmt.Sprintf("s%d", s),
					Picks:     []broker.QueuePick{{Queue: "q", N: s%3 + 1}},
					Now:       T0,
					TTL:       TTL,
				})
				if err != nil {
					errs[s] = err
					return
				}
				if len(ls) > s%3+1 {
					errs[s] = fmt.Errorf("asked for %d tasks, got %d", s%3+1, len(ls))
					return
				}
				if len(ls) == 0 {
					return
				}
				got[s] = append(got[s], ls...)
			}
		})
	}
	close(start)
	wg.Wait()

	seen := map[string]int{}
	tokens := map[uint64]bool{}
	for s := range sessions {
		if errs[s] != nil {
			t.Fatalf("session %d: %v", s, errs[s])
		}
		for _, l := range got[s] {
			if prev, dup := seen[l.Task.ID]; dup {
				t.Fatalf("task %s leased to both s%d and s%d", l.Task.ID, prev, s)
			}
			seen[l.Task.ID] = s
			if !want[l.Task.ID] {
				t.Fatalf("leased unknown task %s", l.Task.ID)
			}
			if tokens[l.Token] {
				t.Fatalf("token %d issued twice", l.Token)
			}
			tokens[l.Token] = true
		}
	}
	if len(seen) != tasks {
		t.Fatalf("leased %d distinct tasks, want %d", len(seen), tasks)
	}
	RequireCounts(t, b, "q", Counts{active: tasks})

	// Every lease is fenced to its own session.
	for s := range sessions {
		for _, l := range got[s] {
			st := Succeed(t, b, fmt.Sprintf("s%d", s), l, at(time.Second))
			if st != completed {
				t.Fatalf("Complete gave %s", st)
			}
		}
	}
	RequireCounts(t, b, "q", Counts{completed: tasks})
}

func testLeaseScheduled(t *testing.T, b broker.Broker) {
	if next, err := b.PromoteDue(t.Context(), T0); err != nil || !next.IsZero() {
		t.Fatalf("PromoteDue on an empty broker = %v, %v; want zero time", next, err)
	}
	first, second := NewTask("q"), NewTask("q")
	first.ProcessAt = at(10 * time.Minute)
	second.ProcessAt = at(20 * time.Minute)
	ts := Enqueue(t, b, T0, second, first)

	next, err := b.PromoteDue(t.Context(), T0)
	if err != nil {
		t.Fatal(err)
	}
	if !next.Equal(first.ProcessAt) {
		t.Fatalf("PromoteDue next = %v, want %v", next, first.ProcessAt)
	}
	if ls := Lease(t, b, "s1", "q", 10, at(15*time.Minute), TTL); len(ls) != 0 {
		t.Fatalf("leased a scheduled task before PromoteDue")
	}
	if _, err := b.PromoteDue(t.Context(), first.ProcessAt.Add(-time.Nanosecond)); err != nil {
		t.Fatal(err)
	}
	RequireState(t, b, ts[1].ID, scheduled)
	if n := Ready(b, "q"); n != 0 {
		t.Fatalf("Ready = %d before the task is due", n)
	}

	next, err = b.PromoteDue(t.Context(), first.ProcessAt)
	if err != nil {
		t.Fatal(err)
	}
	if !next.Equal(second.ProcessAt) {
		t.Fatalf("PromoteDue next = %v, want %v", next, second.ProcessAt)
	}
	RequireState(t, b, ts[1].ID, pending)
	RequireState(t, b, ts[0].ID, scheduled)
	if n := Ready(b, "q"); n != 1 {
		t.Fatalf("Ready = %d after promotion, want 1", n)
	}
	if l := LeaseOne(t, b, "s1", "q", first.ProcessAt); l.Task.ID != ts[1].ID {
		t.Fatalf("leased %s, want the promoted task %s", l.Task.ID, ts[1].ID)
	}

	next, err = b.PromoteDue(t.Context(), at(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if !next.IsZero() {
		t.Fatalf("PromoteDue next = %v with nothing waiting, want zero", next)
	}
	RequireState(t, b, ts[0].ID, pending)
	RequireCounts(t, b, "q", Counts{pending: 1, active: 1})
}

// testLeaseLimitFunc: broker.LeaseLimit caps a lease's expiry and every
// renewal (its task's timeout or deadline, plus the call's LimitGrace),
// and a lapse at the limit is reported as Limited.
func testLeaseLimitFunc(t *testing.T, b broker.Broker) {
	bounded, free, late := NewTask("q"), NewTask("q"), NewTask("q")
	bounded.Timeout = 2 * time.Second
	late.Deadline = at(30 * time.Second)
	ts := Enqueue(t, b, T0, bounded, free, late)
	ls, err := b.Lease(t.Context(), broker.LeaseParams{SessionID: "s1", Picks: []broker.QueuePick{{Queue: "q", N: 2}},
		Now: T0, TTL: TTL, LimitGrace: time.Second})
	if err != nil || len(ls) != 2 {
		t.Fatalf("Lease = %v, %v", ls, err)
	}
	if want := T0.Add(3 * time.Second); !ls[0].Expiry.Equal(want) {
		t.Fatalf("bounded lease expires %v, want the limit %v", ls[0].Expiry, want)
	}
	if !ls[1].Expiry.Equal(T0.Add(TTL)) {
		t.Fatalf("unbounded lease expires %v, want the TTL's", ls[1].Expiry)
	}
	if n, err := b.Extend(t.Context(), broker.ExtendParams{SessionID: "s1", Leases: []broker.LeaseRef{Ref(ls[0]), Ref(ls[1])},
		Now: at(time.Second), TTL: TTL}); err != nil || n != 2 {
		t.Fatalf("Extend = %d, %v", n, err)
	}
	lapsed, _, err := b.LapsedLeases(t.Context(), at(3*time.Second))
	if err != nil || len(lapsed) != 1 || lapsed[0].Lease != Ref(ls[0]) || !lapsed[0].Limited {
		t.Fatalf("LapsedLeases at the limit = %+v, %v; want the bounded lease, Limited", lapsed, err)
	}
	// A deadline caps the lease too.
	l := LeaseOne(t, b, "s1", "q", T0)
	if want := at(30 * time.Second); l.Task.ID != ts[2].ID || !l.Expiry.Equal(want) {
		t.Fatalf("lease of %s expires %v, want its deadline %v (no grace given)", l.Task.ID, l.Expiry, want)
	}
}

// testLeaseReadySince checks that a leased task says when it became ready
// (Task.NextProcessAt), which is what the wait metric measures from: its
// enqueue for a pending one, no earlier than its time for a delayed one,
// and its retry's due time (or later) for a retried one.
func testLeaseReadySince(t *testing.T, b broker.Broker) {
	now := EnqueueOne(t, b, T0, NewTask("q"))
	later := NewTask("q")
	later.ProcessAt = at(time.Minute)
	later.State = InitialState(later, T0)
	delayed := EnqueueOne(t, b, T0, later)
	l := LeaseOne(t, b, "s", "q", at(5*time.Second))
	if l.Task.ID != now.ID || !l.Task.NextProcessAt.Equal(T0) {
		t.Fatalf("a pending task leased: %s ready since %s, want %s since T0", l.Task.ID, l.Task.NextProcessAt, now.ID)
	}
	if _, err := b.PromoteDue(t.Context(), at(2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	l = LeaseOne(t, b, "s", "q", at(3*time.Minute))
	if ready := l.Task.NextProcessAt; l.Task.ID != delayed.ID || ready.Before(at(time.Minute)) || ready.After(at(3*time.Minute)) {
		t.Fatalf("a delayed task leased: %s ready since %s, want %s between its time and the lease", l.Task.ID, ready, delayed.ID)
	}
	Fail(t, b, "s", l, "boom", at(3*time.Minute), at(4*time.Minute))
	if _, err := b.PromoteDue(t.Context(), at(5*time.Minute)); err != nil {
		t.Fatal(err)
	}
	l = LeaseOne(t, b, "s", "q", at(6*time.Minute))
	if ready := l.Task.NextProcessAt; ready.Before(at(4*time.Minute)) || ready.After(at(6*time.Minute)) {
		t.Fatalf("a retried task leased: ready since %s, want between its retry time and the lease", ready)
	}
}
