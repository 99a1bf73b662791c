package bolt

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"
	"time"
	"unsafe"

	"github.com/conveyor-dev/conveyor/broker"
	bt "github.com/conveyor-dev/conveyor/broker/brokertest"
)

// fifoStats describes the FIFOs of one owner (a queue's ready FIFOs, a
// key's held one): the entries they hold, stale ones included, the keys
// their blocks have room for, the valid entries, and whether a compaction
// pass is under way.
type fifoStats struct {
	entries, capacity, valid int
	passing                  bool
}

func fifoCapacity(f *fifo) int {
	n := 0
	for _, b := range f.blocks {
		n += len(b.keys)
	}
	return n
}

func readyStats(e *Engine, queue string) fifoStats {
	e.mu.Lock()
	defer e.mu.Unlock()
	q := e.byName[queue]
	s := fifoStats{entries: q.readyEntries(), valid: q.readyN, passing: q.readyPass != nil}
	for p := range q.ready {
		s.capacity += fifoCapacity(&q.ready[p])
	}
	if q.readyPass != nil {
		s.capacity += fifoCapacity(&q.readyPass.kept)
	}
	return s
}

func heldStats(e *Engine, queue, name string) fifoStats {
	e.mu.Lock()
	defer e.mu.Unlock()
	c := e.ckeys[ckeyID{queue: e.byName[queue].index, name: name}]
	s := fifoStats{entries: c.heldEntries(), valid: c.heldN, passing: c.heldPass != nil}
	for i := range c.held {
		s.capacity += fifoCapacity(&c.held[i].fifo)
	}
	if c.heldPass != nil {
		s.capacity += fifoCapacity(&c.heldPass.kept)
	}
	return s
}

// requireBounded fails unless s holds at most bound entries, in blocks
// with room for at most 8 × bound keys (loose: blocks are sized for their
// FIFO's length, a power of two below twice it, and only the blocks at a
// FIFO's ends, and a pass's kept FIFO's, are partly used).
func requireBounded(t *testing.T, what string, s fifoStats, bound int) {
	t.Helper()
	if s.entries > bound || s.capacity > 8*bound {
		t.Fatalf("%s: %d entries (room for %d) for %d valid ones, want at most %d entries (room for %d)",
			what, s.entries, s.capacity, s.valid, bound, 8*bound)
	}
}

func act(t *testing.T, e *Engine, a broker.Action, ids []string, now time.Time) {
	t.Helper()
	res, err := e.Act(t.Context(), broker.ActParams{Action: a, IDs: ids, Now: now})
	if err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("%s %s: %v", a, ids[i], r.Err)
		}
	}
}

func promote(t *testing.T, e *Engine, now time.Time) {
	t.Helper()
	if _, err := e.PromoteDue(t.Context(), now); err != nil {
		t.Fatalf("PromoteDue: %v", err)
	}
}

func idsOf(tasks []*broker.Task) []string {
	ids := make([]string, len(tasks))
	for i, task := range tasks {
		ids[i] = task.ID
	}
	return ids
}

func leasedIDs(ls []broker.Lease) []string {
	ids := make([]string, len(ls))
	for i, l := range ls {
		ids[i] = l.Task.ID
	}
	return ids
}

// leaveWhileWaiting makes the tasks ids, pending since before now, leave
// without being popped, in the way round r picks: they expire, are
// canceled, deleted or archived.
func leaveWhileWaiting(t *testing.T, e *Engine, r int, ids []string, now time.Time) {
	t.Helper()
	switch r % 4 {
	case 0:
		promote(t, e, now) // past their expiry
	case 1:
		act(t, e, broker.ActionCancel, ids, now)
	case 2:
		act(t, e, broker.ActionDelete, ids, now)
	default:
		act(t, e, broker.ActionArchive, ids, now)
	}
}

// TestStaleReadyEntriesBoundedWithoutPops is the case that lazy deletion
// alone leaves unbounded: a queue that always has a task ready but is
// never popped (nobody serves it), fed tasks that expire, are canceled,
// deleted or archived while they wait. However many go through, its FIFOs
// hold at most twice its ready tasks plus the slack, and a batch more for
// a pass under way. Without compaction they hold every task that left.
func TestStaleReadyEntriesBoundedWithoutPops(t *testing.T) {
	t.Parallel()
	e := openTestEngine(t, Config{})
	first := bt.EnqueueOne(t, e, bt.T0, bt.NewTask("q")) // ready throughout
	const rounds, batch = 100, 1000
	now := bt.T0
	for r := range rounds {
		tasks := make([]broker.NewTask, batch)
		for i := range tasks {
			tasks[i] = bt.NewTask("q")
			tasks[i].Priority = int32(1 + (r+i)%9)
			tasks[i].ExpiresAt = now.Add(time.Second)
		}
		ids := idsOf(bt.Enqueue(t, e, now, tasks...))
		now = now.Add(2 * time.Second)
		leaveWhileWaiting(t, e, r, ids, now)
		requireBounded(t, fmt.Sprintf("after %d tasks left", (r+1)*batch), readyStats(e, "q"), 2*1+compactSlack+batch)
	}
	if got := leasedIDs(bt.Lease(t, e, "s", "q", 10, now, time.Hour)); !slices.Equal(got, []string{first.ID}) {
		t.Fatalf("leased %v, want only the task ready throughout, %s", got, first.ID)
	}
}

// TestStaleHeldEntriesBounded is the same case for a concurrency key: its
// admitted task runs and never finishes, one task waits behind it
// throughout, and a stream of the key's tasks expire, are canceled,
// deleted or archived while held back, spread over every priority. The
// key's FIFOs stay bounded, and the waiting task is admitted when the
// running one ends.
func TestStaleHeldEntriesBounded(t *testing.T) {
	t.Parallel()
	e := openTestEngine(t, Config{})
	keyed := func() broker.NewTask {
		nt := bt.NewTask("q")
		nt.ConcurrencyKey = "k"
		return nt
	}
	bt.EnqueueOne(t, e, bt.T0, keyed())
	running := bt.Lease(t, e, "s", "q", 1, bt.T0, time.Hour)
	waiting := bt.EnqueueOne(t, e, bt.T0, keyed())
	const rounds, batch = 40, 1000
	now := bt.T0
	for r := range rounds {
		tasks := make([]broker.NewTask, batch)
		for i := range tasks {
			tasks[i] = keyed()
			tasks[i].ExpiresAt = now.Add(time.Second)
			tasks[i].Priority = int32(1 + i%9)
		}
		ids := idsOf(bt.Enqueue(t, e, now, tasks...))
		now = now.Add(2 * time.Second)
		leaveWhileWaiting(t, e, r, ids, now)
		requireBounded(t, fmt.Sprintf("after %d tasks left", (r+1)*batch), heldStats(e, "q", "k"), 2*1+compactSlack+batch)
	}
	bt.Succeed(t, e, "s", running[0], now)
	if got := leasedIDs(bt.Lease(t, e, "s", "q", 10, now, time.Hour)); !slices.Equal(got, []string{waiting.ID}) {
		t.Fatalf("leased %v, want only the task held throughout, %s", got, waiting.ID)
	}
}

// TestRevivedTasksDeduplicated cancels tasks and runs them again (RunTask)
// while their queue is never popped, or while their key's admitted task
// runs. Each return leaves the task one more entry that looks as valid as
// the first (a pop takes the first and skips the others), which no pop,
// and no scan while the task is away, ever drops: compaction keeps one
// entry of each task, so the FIFO stays bounded, and each task is still
// dispatched exactly once, the one waiting throughout first.
func TestRevivedTasksDeduplicated(t *testing.T) {
	t.Parallel()
	for _, keyed := range []bool{false, true} {
		t.Run(fmt.Sprintf("keyed=%v", keyed), func(t *testing.T) {
			t.Parallel()
			const slack, n, cycles = 16, 10, 150
			e := openTestEngine(t, Config{compactSlack: slack})
			newTask := func() broker.NewTask {
				nt := bt.NewTask("q")
				if keyed {
					nt.ConcurrencyKey = "k"
				}
				return nt
			}
			stats := func() fifoStats { return readyStats(e, "q") }
			var running []broker.Lease
			if keyed {
				bt.EnqueueOne(t, e, bt.T0, newTask())
				running = bt.Lease(t, e, "s", "q", 1, bt.T0, time.Hour)
				stats = func() fifoStats { return heldStats(e, "q", "k") }
			}
			first := bt.EnqueueOne(t, e, bt.T0, newTask())
			tasks := make([]broker.NewTask, n)
			for i := range tasks {
				tasks[i] = newTask()
			}
			ids := idsOf(bt.Enqueue(t, e, bt.T0, tasks...))
			for c := range cycles {
				act(t, e, broker.ActionCancel, ids, bt.T0)
				act(t, e, broker.ActionRun, ids, bt.T0)
				// A pass under way may have a cycle's returns still to scan.
				requireBounded(t, fmt.Sprintf("cycle %d", c), stats(), 2*(n+1)+slack+n)
			}
			var got []string
			for _, l := range running {
				bt.Succeed(t, e, "s", l, bt.T0)
			}
			for {
				ls := bt.Lease(t, e, "s", "q", 2*n, bt.T0, time.Hour)
				if len(ls) == 0 {
					break
				}
				got = append(got, leasedIDs(ls)...)
				for _, l := range ls {
					bt.Succeed(t, e, "s", l, bt.T0)
				}
			}
			if len(got) != n+1 || got[0] != first.ID {
				t.Fatalf("leased %v; want %d tasks, %s first", got, n+1, first.ID)
			}
			want := append([]string{first.ID}, ids...)
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Fatalf("leased %v, want each of %v once", got, want)
			}
		})
	}
}

// readyModel is what a queue's ready line should hold: per priority, the
// ids in the order they became ready.
type readyModel [10][]string

func (m *readyModel) push(prio int32, id string) { m[prio] = append(m[prio], id) }

func (m *readyModel) remove(ids []string) {
	gone := make(map[string]bool, len(ids))
	for _, id := range ids {
		gone[id] = true
	}
	for p := range m {
		m[p] = slices.DeleteFunc(m[p], func(id string) bool { return gone[id] })
	}
}

// pop takes up to n ids as dispatch should: highest priority first, FIFO
// within a priority.
func (m *readyModel) pop(n int) []string {
	var out []string
	for p := len(m) - 1; p >= 0 && len(out) < n; p-- {
		k := min(n-len(out), len(m[p]))
		out = append(out, m[p][:k]...)
		m[p] = m[p][k:]
	}
	return out
}

func (m *readyModel) len() int {
	n := 0
	for p := range m {
		n += len(m[p])
	}
	return n
}

// pick returns a random share of the model's ids.
func (m *readyModel) pick(rng *rand.Rand, share float64) []string {
	var out []string
	for p := range m {
		for _, id := range m[p] {
			if rng.Float64() < share {
				out = append(out, id)
			}
		}
	}
	return out
}

// orderTest drives one engine and a readyModel with the same random
// enqueues (at random priorities, some to expire), departures (cancels,
// deletes, expiries) and leases, with a slack so small that compaction
// passes start and end all the time, and checks that every lease takes
// what the model says.
type orderTest struct {
	t        *testing.T
	e        *Engine
	rng      *rand.Rand
	model    readyModel
	expiring map[string]time.Time
	now      time.Time
	// leasedPassing counts leases made while a pass was under way.
	leasedPassing int
}

const orderSlack = 8

func (o *orderTest) enqueue() {
	n := 1 + o.rng.IntN(60)
	tasks := make([]broker.NewTask, n)
	for i := range tasks {
		tasks[i] = bt.NewTask("q")
		tasks[i].Priority = int32([]int{2, 5, 5, 5, 9}[o.rng.IntN(5)])
		if o.rng.IntN(4) == 0 {
			tasks[i].ExpiresAt = o.now.Add(time.Second)
		}
	}
	for i, task := range bt.Enqueue(o.t, o.e, o.now, tasks...) {
		o.model.push(tasks[i].Priority, task.ID)
		if !tasks[i].ExpiresAt.IsZero() {
			o.expiring[task.ID] = tasks[i].ExpiresAt
		}
	}
}

func (o *orderTest) depart() {
	ids := o.model.pick(o.rng, 0.1+0.6*o.rng.Float64())
	if len(ids) == 0 {
		return
	}
	act(o.t, o.e, []broker.Action{broker.ActionCancel, broker.ActionDelete}[o.rng.IntN(2)], ids, o.now)
	o.model.remove(ids)
}

func (o *orderTest) expire() {
	o.now = o.now.Add(2 * time.Second)
	promote(o.t, o.e, o.now)
	var gone []string
	for id, at := range o.expiring {
		if !at.After(o.now) {
			gone = append(gone, id)
			delete(o.expiring, id)
		}
	}
	o.model.remove(gone)
}

func (o *orderTest) lease(n int) {
	o.t.Helper()
	if readyStats(o.e, "q").passing {
		o.leasedPassing++
	}
	got := leasedIDs(bt.Lease(o.t, o.e, "s", "q", n, o.now, time.Hour))
	if want := o.model.pop(n); !slices.Equal(got, want) {
		o.t.Fatalf("leased %v, want %v", got, want)
	}
	for _, id := range got {
		delete(o.expiring, id)
	}
}

func (o *orderTest) pauseAndResume() {
	if _, err := o.e.SetQueuePaused(o.t.Context(), "q", true); err != nil {
		o.t.Fatal(err)
	}
	if got := bt.Lease(o.t, o.e, "s", "q", 10, o.now, time.Hour); len(got) != 0 {
		o.t.Fatalf("leased %d tasks of a paused queue", len(got))
	}
	o.enqueue()
	o.depart()
	if _, err := o.e.SetQueuePaused(o.t.Context(), "q", false); err != nil {
		o.t.Fatal(err)
	}
}

// check compares the ready count with the model's and, after departures,
// checks the rule that bounds the entries: unless a pass is under way,
// the stale ones are at most the valid ones plus the slack.
func (o *orderTest) check(step int, departed bool) {
	o.t.Helper()
	s := readyStats(o.e, "q")
	if s.valid != o.model.len() {
		o.t.Fatalf("step %d: %d tasks ready, want %d", step, s.valid, o.model.len())
	}
	if departed && !s.passing && s.entries-s.valid > s.valid+orderSlack {
		o.t.Fatalf("step %d: %d entries for %d ready tasks and no pass under way", step, s.entries, s.valid)
	}
}

// TestCompactionKeepsDispatchOrder checks that passes never change what is
// dispatched or in which order, with pushes, pops, departures, expiries,
// a pause and priorities interleaved with them.
func TestCompactionKeepsDispatchOrder(t *testing.T) {
	t.Parallel()
	for seed := range uint64(4) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			o := &orderTest{t: t, e: openTestEngine(t, Config{compactSlack: orderSlack}),
				rng: rand.New(rand.NewPCG(seed, 42)), expiring: map[string]time.Time{}, now: bt.T0}
			for step := range 400 {
				r := o.rng.IntN(20)
				switch {
				case r < 8:
					o.enqueue()
				case r < 13:
					o.depart()
				case r < 15:
					o.expire()
				case r < 19:
					o.lease(1 + o.rng.IntN(15))
				default:
					o.pauseAndResume()
				}
				o.check(step, r >= 8 && r < 15 || r == 19)
			}
			o.lease(o.model.len() + 1)
			if o.leasedPassing == 0 {
				t.Fatal("no lease was made while a pass was under way")
			}
		})
	}
}

// TestCompactionKeepsHeldOrder is TestCompactionKeepsDispatchOrder for a
// concurrency key's held FIFOs: with its one admitted task running, its
// held tasks of mixed priorities are fed and leave at random, passes come
// and go, and each time the running task ends, the next one admitted is
// the oldest held of the highest priority. Its FIFOs stay bounded.
func TestCompactionKeepsHeldOrder(t *testing.T) {
	t.Parallel()
	for seed := range uint64(3) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			e := openTestEngine(t, Config{compactSlack: orderSlack})
			rng := rand.New(rand.NewPCG(seed, 43))
			keyed := func(prio int32) broker.NewTask {
				nt := bt.NewTask("q")
				nt.ConcurrencyKey = "k"
				nt.Priority = prio
				return nt
			}
			bt.EnqueueOne(t, e, bt.T0, keyed(1))
			running := bt.LeaseOne(t, e, "s", "q", bt.T0)
			var held readyModel
			admittedPassing := 0
			for step := range 300 {
				switch r := rng.IntN(10); {
				case r < 5:
					prio := []int32{1, 4, 9}[rng.IntN(3)]
					tasks := make([]broker.NewTask, 1+rng.IntN(30))
					for i := range tasks {
						tasks[i] = keyed(prio)
					}
					for _, id := range idsOf(bt.Enqueue(t, e, bt.T0, tasks...)) {
						held.push(prio, id)
					}
				case r < 8:
					leaving := held.pick(rng, 0.1+0.6*rng.Float64())
					held.remove(leaving)
					if len(leaving) > 0 {
						act(t, e, []broker.Action{broker.ActionCancel, broker.ActionDelete}[rng.IntN(2)], leaving, bt.T0)
					}
				case held.len() > 0:
					if heldStats(e, "q", "k").passing {
						admittedPassing++
					}
					bt.Succeed(t, e, "s", running, bt.T0)
					running = bt.LeaseOne(t, e, "s", "q", bt.T0)
					if want := held.pop(1)[0]; running.Task.ID != want {
						t.Fatalf("step %d: admitted %s (priority %d), want %s", step, running.Task.ID, running.Task.Priority, want)
					}
				}
				s := heldStats(e, "q", "k")
				if s.valid != held.len() {
					t.Fatalf("step %d: %d tasks held, want %d", step, s.valid, held.len())
				}
				// A pass starts past 2v+slack and ends within an eighth of
				// that many departures; a step makes up to 30 of them.
				requireBounded(t, fmt.Sprintf("step %d", step), s, 2*(2*s.valid+orderSlack)+30)
			}
			if admittedPassing == 0 {
				t.Fatal("no task was admitted while a pass was under way")
			}
		})
	}
}

// TestCompactionUnderWay leaves a pass half done and checks that the
// queue is dispatched in order through it: popped, paused, fed and
// depleted, resumed, then reopened (memory is rebuilt from the file,
// which knows nothing of passes).
func TestCompactionUnderWay(t *testing.T) {
	t.Parallel()
	cfg := Config{Path: filepath.Join(t.TempDir(), "conveyor.db"), compactSlack: 16}
	e, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := e.Close(); err != nil {
			t.Error(err)
		}
	}()
	var model readyModel
	enqueue := func(n int, prio int32) []string {
		tasks := make([]broker.NewTask, n)
		for i := range tasks {
			tasks[i] = bt.NewTask("q")
			tasks[i].Priority = prio
		}
		ids := idsOf(bt.Enqueue(t, e, bt.T0, tasks...))
		for _, id := range ids {
			model.push(prio, id)
		}
		return ids
	}
	requirePassing := func(what string) {
		t.Helper()
		if !readyStats(e, "q").passing {
			t.Fatalf("%s: no pass under way", what)
		}
	}
	var leased []broker.Lease
	lease := func(what string, n int) {
		t.Helper()
		ls := bt.Lease(t, e, "s", "q", n, bt.T0, time.Hour)
		if got, want := leasedIDs(ls), model.pop(n); !slices.Equal(got, want) {
			t.Fatalf("%s: leased %v, want %v", what, got, want)
		}
		leased = append(leased, ls...)
	}
	enqueue(200, 7) // urgent
	normal := enqueue(1000, 5)
	// Two of every three normal tasks leave, 666 in all: past the 609th
	// departure the stale entries outnumber the ready ones by more than
	// the slack, and the pass scans 8 entries for each one after, not
	// enough to finish it.
	var leaving []string
	for i, id := range normal {
		if i%3 != 0 {
			leaving = append(leaving, id)
		}
	}
	act(t, e, broker.ActionCancel, leaving, bt.T0)
	model.remove(leaving)
	requirePassing("after the departures")
	lease("popped", 320) // the urgent ones, then normal ones: those the pass kept, and more
	requirePassing("after the pops")

	if _, err := e.SetQueuePaused(t.Context(), "q", true); err != nil {
		t.Fatal(err)
	}
	enqueue(50, 5)
	enqueue(10, 9)
	leaving = model.pick(rand.New(rand.NewPCG(1, 2)), 0.02)
	act(t, e, broker.ActionDelete, leaving, bt.T0)
	model.remove(leaving)
	requirePassing("paused")
	if _, err := e.SetQueuePaused(t.Context(), "q", false); err != nil {
		t.Fatal(err)
	}
	lease("resumed", 40)
	requirePassing("resumed")

	for _, l := range leased { // else the reopen makes them pending again
		bt.Succeed(t, e, "s", l, bt.T0)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if e, err = Open(cfg); err != nil {
		t.Fatal(err)
	}
	if s := readyStats(e, "q"); s.entries != s.valid || s.valid != model.len() {
		t.Fatalf("reopened: %d entries for %d ready tasks, want %d of each", s.entries, s.valid, model.len())
	}
	lease("reopened", model.len()+1)
}

// TestMetaSize checks that meta stays 32 bytes (the table's slots 48):
// passMark fits in padding, and the kind (route.go) took the last 8.
func TestMetaSize(t *testing.T) {
	t.Parallel()
	if n := unsafe.Sizeof(meta{}); n != 32 {
		t.Fatalf("meta is %d bytes, want 32", n)
	}
}
