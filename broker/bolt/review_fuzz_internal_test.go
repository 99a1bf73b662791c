package bolt

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"

	"github.com/conveyor-dev/conveyor/broker"
	bt "github.com/conveyor-dev/conveyor/broker/brokertest"
	storagev1 "github.com/conveyor-dev/conveyor/gen/conveyor/storage/v1"
)

// seqRun drives an engine through a random (seeded) sequence of calls,
// checking after each that memory and file agree, and across reopens that
// the rebuilt state is the state before.
type seqRun struct {
	t      *testing.T
	rng    *rand.Rand
	path   string
	e      *Engine
	now    time.Time
	ids    []string
	leases []broker.Lease // granted, maybe answered since
	step   int
	op     string
	// shared: other runs use e at once (no reopens, no checks between
	// steps).
	shared bool
	clock  *atomic.Int64 // shared runs' time (Unix ns), when set
}

func (r *seqRun) open() {
	e, err := Open(Config{Path: r.path, Now: func() time.Time { return r.now }, compactSlack: 4})
	if err != nil {
		r.t.Fatalf("step %d: Open: %v", r.step, err)
	}
	r.e = e
}

func (r *seqRun) fatalf(format string, args ...any) {
	r.t.Helper()
	if r.shared {
		panic(fmt.Sprintf("step %d (%s): %s", r.step, r.op, fmt.Sprintf(format, args...)))
	}
	r.t.Fatalf("seed step %d (%s): %s", r.step, r.op, fmt.Sprintf(format, args...))
}

func (r *seqRun) pick() string {
	if len(r.ids) == 0 {
		return bt.NewID()
	}
	return r.ids[r.rng.IntN(len(r.ids))]
}

func (r *seqRun) newTask() broker.NewTask {
	rng := r.rng
	nt := bt.NewTask([]string{"q0", "q1"}[rng.IntN(2)])
	nt.Priority = int32(1 + rng.IntN(3))
	nt.MaxRetry = int32(rng.IntN(3))
	if rng.IntN(4) == 0 {
		nt.UniqueKey = fmt.Sprintf("u%d", rng.IntN(3))
		if rng.IntN(2) == 0 {
			nt.UniqueUntil = r.now.Add(time.Duration(1+rng.IntN(20)) * time.Second)
		}
	}
	if rng.IntN(3) == 0 {
		nt.ConcurrencyKey = fmt.Sprintf("k%d", rng.IntN(2))
	}
	if rng.IntN(5) == 0 {
		nt.ExpiresAt = r.now.Add(time.Duration(1+rng.IntN(20)) * time.Second)
	}
	if rng.IntN(8) == 0 {
		nt.Deadline = r.now.Add(time.Duration(1+rng.IntN(30)) * time.Second)
	}
	if rng.IntN(5) == 0 {
		d := time.Duration(1+rng.IntN(30)) * time.Second
		nt.Retention = &d
	}
	switch rng.IntN(6) {
	case 0:
		nt.ProcessAt = r.now.Add(time.Duration(1+rng.IntN(10)) * time.Second)
	case 1:
		nt.Group = fmt.Sprintf("g%d", rng.IntN(2))
	case 2:
		if len(r.ids) > 0 {
			for range 1 + rng.IntN(2) {
				nt.DependsOn = append(nt.DependsOn, broker.Dependency{TaskID: r.pick(), OnFailure: broker.OnFailure(rng.IntN(3))})
			}
		}
		if rng.IntN(2) == 0 {
			nt.Group = fmt.Sprintf("g%d", rng.IntN(2))
		}
	}
	if nt.Group != "" {
		nt.ConcurrencyKey = "" // the server refuses both
		if rng.IntN(3) == 0 {
			nt.Type = "other" // fired groups of two types, in two lines
		}
	}
	if rng.IntN(4) == 0 {
		// A producer's id: new, or one used before (the task may be
		// live, terminal, deleted or purged by now).
		if rng.IntN(2) == 0 && len(r.ids) > 0 {
			nt.ID = r.pick()
		} else {
			nt.ID = bt.NewID()
		}
	}
	return nt
}

func (r *seqRun) leased(ls []broker.Lease) { r.leases = append(r.leases, ls...) }

func (r *seqRun) do() {
	if r.clock != nil {
		r.now = time.Unix(0, r.clock.Load()).UTC()
	}
	ctx := context.Background()
	rng := r.rng
	e := r.e
	now := r.now
	switch n := rng.IntN(100); {
	case n < 20:
		r.op = "enqueue"
		tasks := []broker.NewTask{r.newTask()}
		if rng.IntN(3) == 0 {
			tasks = append(tasks, r.newTask())
		}
		res, err := e.Enqueue(ctx, broker.EnqueueParams{Tasks: bt.WithStates(tasks, now), Now: now})
		if err != nil {
			r.fatalf("Enqueue: %v", err)
		}
		for _, x := range res {
			if x.Task != nil {
				r.ids = append(r.ids, x.Task.ID)
			}
		}
	case n < 24:
		r.op = "enqueuetx"
		tasks := []broker.NewTask{r.newTask(), r.newTask()}
		out, err := e.EnqueueTx(ctx, broker.EnqueueParams{Tasks: bt.WithStates(tasks, now), Now: now})
		if err == nil {
			for _, x := range out {
				if !x.Existed {
					r.ids = append(r.ids, x.ID)
				}
			}
		}
	case n < 36:
		r.op = "lease"
		ls, err := e.Lease(ctx, broker.LeaseParams{SessionID: "s", Now: now, TTL: 10 * time.Second,
			Picks: []broker.QueuePick{{Queue: []string{"q0", "q1"}[rng.IntN(2)], N: 1 + rng.IntN(3)}}})
		if err != nil {
			r.fatalf("Lease: %v", err)
		}
		r.leased(ls)
	case n < 40:
		r.op = "leasegroups"
		gl, err := e.LeaseGroups(ctx, broker.GroupLeaseParams{SessionID: "s", Queue: []string{"q0", "q1"}[rng.IntN(2)],
			Types: [][]string{{"test"}, {"test"}, {"other", "test"}}[rng.IntN(3)], N: 1 + rng.IntN(2), Now: now, TTL: 10 * time.Second})
		if err != nil {
			r.fatalf("LeaseGroups: %v", err)
		}
		for _, g := range gl {
			r.leased(g.Leases)
		}
	case n < 58:
		r.op = "complete"
		if len(r.leases) == 0 {
			return
		}
		i := rng.IntN(len(r.leases))
		l := r.leases[i]
		r.leases = append(r.leases[:i], r.leases[i+1:]...)
		ref := bt.Ref(l)
		var d broker.Decision
		switch rng.IntN(5) {
		case 0, 1:
			d = broker.Completed("s", ref, now, []byte("ok"))
		case 2:
			d = broker.Retrying("s", ref, now, now.Add(time.Duration(rng.IntN(5))*time.Second), "boom").WithVerdict()
		case 3:
			d = broker.Archived("s", ref, now, "dead").WithVerdict()
		case 4:
			d = broker.Released("s", ref, now)
		}
		r.op = fmt.Sprintf("complete %v %s", d.Kind, l.Task.ID)
		_, _ = e.Complete(ctx, d)
	case n < 70:
		a := broker.Action(1 + rng.IntN(4))
		id := r.pick()
		r.op = fmt.Sprintf("act %v %s", a, id)
		if _, err := e.Act(ctx, broker.ActParams{Action: a, IDs: []string{id}, Now: now}); err != nil {
			r.fatalf("Act: %v", err)
		}
	case n < 80:
		r.op = "tick"
		r.now = r.now.Add(time.Duration(rng.IntN(3000)) * time.Millisecond)
		if r.clock != nil {
			r.now = time.Unix(0, r.clock.Add(int64(rng.IntN(3000))*int64(time.Millisecond))).UTC()
		}
		if _, err := e.PromoteDue(ctx, r.now); err != nil {
			r.fatalf("PromoteDue: %v", err)
		}
	case n < 84:
		r.op = "reap"
		lapsed, _, err := e.LapsedLeases(ctx, now)
		if err != nil {
			r.fatalf("LapsedLeases: %v", err)
		}
		var ds []broker.Decision
		for _, l := range lapsed {
			if l.Retried < l.MaxRetry {
				ds = append(ds, broker.Retrying(l.SessionID, l.Lease, now, now.Add(time.Second), "lapsed"))
			} else {
				ds = append(ds, broker.Archived(l.SessionID, l.Lease, now, "lapsed"))
			}
		}
		if err := e.Reclaim(ctx, ds); err != nil {
			r.fatalf("Reclaim: %v", err)
		}
	case n < 88:
		r.op = "purge"
		if _, err := e.Purge(ctx, broker.PurgeParams{Now: now, CompletedBefore: now.Add(-5 * time.Second),
			ArchivedBefore: now.Add(-10 * time.Second), Limit: 1 + rng.IntN(5)}); err != nil {
			r.fatalf("Purge: %v", err)
		}
	case n < 91:
		r.op = "config"
		q := []string{"q0", "q1"}[rng.IntN(2)]
		cl, ma := int32(rng.IntN(3)), int32(rng.IntN(4))
		gs := int32(rng.IntN(4))
		if _, err := e.UpdateQueueConfig(ctx, q, func(c *broker.QueueConfig) {
			c.ConcurrencyLimit, c.MaxActive = cl, ma
			c.Group.MaxSize, c.Group.MaxDelay = gs, 3*time.Second
		}); err != nil {
			r.fatalf("UpdateQueueConfig: %v", err)
		}
	case n < 93:
		r.op = "pause"
		q := []string{"q0", "q1"}[rng.IntN(2)]
		if _, err := e.SetQueuePaused(ctx, q, rng.IntN(2) == 0); err != nil {
			r.fatalf("SetQueuePaused: %v", err)
		}
	case n < 96:
		r.op = "release all"
		var refs []broker.LeaseRef
		for _, l := range r.leases {
			refs = append(refs, bt.Ref(l))
		}
		r.leases = nil
		if err := e.Release(ctx, broker.ReleaseParams{SessionID: "s", Leases: refs, Now: now}); err != nil {
			r.fatalf("Release: %v", err)
		}
	default:
		r.op = "reopen"
		if !r.shared {
			r.reopen()
		}
	}
}

// snapshot is what a reopen must keep: each task's state as the file has
// it (ACTIVE as PENDING: a restart releases it), and each queue's counts.
type snapshot struct {
	states map[key]broker.State
	counts map[string]broker.Counts
	unique map[string]key // the keys that hold at now
	// canceling: some ACTIVE task was canceled while it ran, which the
	// reopen finishes (and its dependents learn of it).
	canceling bool
}

func (r *seqRun) snap() snapshot {
	e := r.e
	if err := e.Sync(context.Background()); err != nil {
		r.fatalf("Sync: %v", err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	s := snapshot{states: map[key]broker.State{}, counts: map[string]broker.Counts{}}
	_ = e.db.View(func(tx *bbolt.Tx) error {
		for _, b := range [][]byte{bucketLive, bucketDone} {
			_ = tx.Bucket(b).ForEach(func(k, v []byte) error {
				var st storagev1.TaskStatus
				if err := proto.Unmarshal(v, &st); err != nil {
					r.fatalf("status: %v", err)
				}
				s.states[key(k)] = stateOf(&st)
				s.canceling = s.canceling || stateOf(&st) == stateActive && st.GetCancelRequested()
				return nil
			})
		}
		return nil
	})
	s.unique = map[string]key{}
	for uk, c := range e.unique {
		if e.uniqueHeldLocked(c, nanos(r.now)) {
			s.unique[uk] = c.k
		}
	}
	for _, q := range e.queues {
		if q == nil {
			continue // deleted
		}
		c := q.counts
		c[statePending] += c[stateActive]
		c[stateActive] = 0
		s.counts[q.name] = c
	}
	return s
}

func (r *seqRun) reopen() {
	before := r.snap()
	for k, st := range before.states {
		if st == stateActive {
			before.states[k] = statePending
		}
	}
	if err := r.e.Close(); err != nil {
		r.fatalf("Close: %v", err)
	}
	r.leases = nil
	r.open()
	after := r.snap()
	for k, st := range before.states {
		if got, ok := after.states[k]; !ok {
			r.fatalf("task %s was %s before the reopen, gone after", k, st)
		} else if got != st && !before.canceling {
			r.fatalf("task %s was %s before the reopen, %s after", k, st, got)
		}
	}
	for k, st := range after.states {
		if _, ok := before.states[k]; !ok {
			r.fatalf("task %s (%s) appeared with the reopen", k, st)
		}
	}
	for uk, k := range before.unique {
		if after.unique[uk] != k && !before.canceling {
			r.fatalf("unique key %s held by %s before the reopen, by %s after", uk, k, after.unique[uk])
		}
	}
	for uk, k := range after.unique {
		if _, ok := before.unique[uk]; !ok {
			r.fatalf("unique key %s free before the reopen, held by %s after", uk, k)
		}
	}
	for name, c := range before.counts {
		if after.counts[name] != c && !before.canceling {
			r.fatalf("queue %s counts %v before the reopen, %v after", name, c, after.counts[name])
		}
	}
}

// check compares memory with the file, after a Sync.
func (r *seqRun) check() {
	e := r.e
	if err := e.Sync(context.Background()); err != nil {
		r.fatalf("Sync: %v", err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.commit.open.ops) > 0 || e.commit.inflight != nil {
		return // a timer's change came in meanwhile: check next time
	}
	type counts struct{ live, done map[broker.State]int64 }
	perQ := map[string]*counts{}
	qc := func(name string) *counts {
		c := perQ[name]
		if c == nil {
			c = &counts{live: map[broker.State]int64{}, done: map[broker.State]int64{}}
			perQ[name] = c
		}
		return c
	}
	liveN := 0
	wantIndex := map[string]bool{}
	err := e.db.View(func(tx *bbolt.Tx) error {
		if err := tx.Bucket(bucketLive).ForEach(func(kb, v []byte) error {
			var st storagev1.TaskStatus
			if err := proto.Unmarshal(v, &st); err != nil {
				return err
			}
			k := key(kb)
			liveN++
			qc(st.GetQueue()).live[stateOf(&st)]++
			wantIndex[string(indexKey(st.GetQueue(), stateOf(&st), st.GetType(), k))] = true
			if tx.Bucket(bucketTasks).Get(kb) == nil {
				return fmt.Errorf("live task %s has no spec", k)
			}
			m, ok := e.tasks.get(k)
			if !ok {
				return fmt.Errorf("live task %s (%s in the file) is not in memory", k, stateOf(&st))
			}
			if m.state != stateOf(&st) {
				return fmt.Errorf("task %s is %s in memory, %s in the file", k, m.state, stateOf(&st))
			}
			if m.retried != st.GetRetried() {
				return fmt.Errorf("task %s has %d retries in memory, %d in the file", k, m.retried, st.GetRetried())
			}
			if m.flags&flagCommitted == 0 {
				return fmt.Errorf("task %s is durable but not committed in memory", k)
			}
			return r.checkTaskLocked(k, m, &st)
		}); err != nil {
			return err
		}
		if err := tx.Bucket(bucketDone).ForEach(func(kb, v []byte) error {
			var st storagev1.TaskStatus
			if err := proto.Unmarshal(v, &st); err != nil {
				return err
			}
			k := key(kb)
			qc(st.GetQueue()).done[stateOf(&st)]++
			wantIndex[string(indexKey(st.GetQueue(), stateOf(&st), st.GetType(), k))] = true
			if !stateOf(&st).Terminal() {
				return fmt.Errorf("done task %s is %s", k, stateOf(&st))
			}
			if _, ok := e.tasks.get(k); ok {
				return fmt.Errorf("done task %s is live in memory", k)
			}
			if tx.Bucket(bucketTasks).Get(kb) == nil {
				return fmt.Errorf("done task %s has no spec", k)
			}
			if at := st.GetPurgeAt(); at != 0 {
				if tx.Bucket(bucketPurge).Get(purgeKey(at, k)) == nil {
					return fmt.Errorf("done task %s has no purge entry", k)
				}
			} else if tx.Bucket(bucketEnded).Get(endedKey(classOf(stateOf(&st)), st.GetCompletedAt(), k)) == nil {
				return fmt.Errorf("done task %s (%s) has no ended entry", k, stateOf(&st))
			}
			return nil
		}); err != nil {
			return err
		}
		var extra []string
		if err := tx.Bucket(bucketIndex).ForEach(func(kb, _ []byte) error {
			if !wantIndex[string(kb)] {
				extra = append(extra, fmt.Sprintf("%q", kb))
			}
			delete(wantIndex, string(kb))
			return nil
		}); err != nil {
			return err
		}
		if len(extra) > 0 || len(wantIndex) > 0 {
			return fmt.Errorf("listing index: %d stale entries %v, %d missing", len(extra), extra, len(wantIndex))
		}
		return tx.Bucket(bucketQueues).ForEach(func(name, v []byte) error {
			var rec storagev1.QueueRecord
			if err := proto.Unmarshal(v, &rec); err != nil {
				return err
			}
			c := qc(string(name))
			if rec.GetCompleted() != c.done[stateCompleted] || rec.GetArchived() != c.done[stateArchived] || rec.GetCanceled() != c.done[stateCanceled] {
				return fmt.Errorf("queue %s record counts %d/%d/%d terminal, the file holds %v", name,
					rec.GetCompleted(), rec.GetArchived(), rec.GetCanceled(), c.done)
			}
			return nil
		})
	})
	if err != nil {
		r.fatalf("%v", err)
	}
	if e.tasks.len() != liveN {
		r.fatalf("memory holds %d live tasks, the file %d", e.tasks.len(), liveN)
	}
	for _, q := range e.queues {
		if q == nil {
			continue // deleted
		}
		c := qc(q.name)
		for s := broker.State(1); s <= stateBlocked; s++ {
			want := c.live[s] + c.done[s]
			if q.counts[s] != want {
				r.fatalf("queue %s counts %d %s, the file holds %d", q.name, q.counts[s], s, want)
			}
		}
	}
	// Concurrency keys: admitted = ready or active tasks of the key.
	adm := map[*ckey]int{}
	held := map[*ckey]int{}
	for k, c := range e.keyOf {
		m, _ := e.tasks.get(k)
		if m.state == stateActive || m.flags&flagInReady != 0 {
			adm[c]++
		}
		if m.flags&flagHeld != 0 {
			held[c]++
		}
	}
	for id, c := range e.ckeys {
		if adm[c] != c.admitted || held[c] != c.heldN {
			r.fatalf("key %v admits %d, holds %d; its tasks: %d admitted, %d held", id, c.admitted, c.heldN, adm[c], held[c])
		}
		if c.heldN > 0 && c.admitted < c.q.cfg.KeyLimit() {
			r.fatalf("key %v holds %d tasks with %d of %d admitted", id, c.heldN, c.admitted, c.q.cfg.KeyLimit())
		}
	}
	for _, q := range e.queues {
		if q == nil {
			continue // deleted
		}
		seen := map[key]bool{}
		for p := range q.ready {
			fs := []*fifo{&q.ready[p]}
			if q.readyPass != nil && q.readyPass.prio == p {
				fs = append(fs, &q.readyPass.kept)
			}
			for _, f := range fs {
				for _, k := range fifoKeys(f) {
					if m, live := e.tasks.get(k); live && m.readyIn(q, p) {
						seen[k] = true
					}
				}
			}
		}
		if len(seen) != q.readyN {
			r.fatalf("queue %s readyN %d, its FIFOs hold %d ready tasks", q.name, q.readyN, len(seen))
		}
	}
	for _, c := range e.ckeys {
		seen := map[key]bool{}
		for i := range c.held {
			h := &c.held[i]
			p := int(h.prio)
			if i > 0 && p >= int(c.held[i-1].prio) {
				r.fatalf("key %s holds its FIFO of priority %d after that of %d", c.name, p, c.held[i-1].prio)
			}
			fs := []*fifo{&h.fifo}
			if c.heldPass != nil && c.heldPass.prio == p {
				fs = append(fs, &c.heldPass.kept)
			}
			for _, f := range fs {
				for _, k := range fifoKeys(f) {
					if m, live := e.tasks.get(k); live && e.heldBy(k, m, c, p) {
						seen[k] = true
					}
				}
			}
		}
		if c.heldPass != nil && c.heldAt(c.heldPass.prio) == nil {
			r.fatalf("key %s has a pass over its FIFO of priority %d, which it does not hold", c.name, c.heldPass.prio)
		}
		if len(seen) != c.heldN {
			r.fatalf("key %s heldN %d, its FIFO holds %d", c.name, c.heldN, len(seen))
		}
	}
	for k := range e.depGen {
		if m, live := e.tasks.get(k); !live || m.state != stateBlocked {
			r.fatalf("task %s has a dependency incarnation, %v (live %v)", k, m.state, live)
		}
	}
	for k := range e.memberGen {
		if m, live := e.tasks.get(k); !live || m.state != stateAggr {
			r.fatalf("task %s has a group incarnation, %v (live %v)", k, m.state, live)
		}
	}
	for k := range e.ranPastExpiry {
		if m, live := e.tasks.get(k); !live || m.state != stateActive {
			r.fatalf("task %s ran past its expiry, %v (live %v)", k, m.state, live)
		}
	}
	groups := []*group{}
	for _, g := range e.openGroups {
		groups = append(groups, g)
	}
	for _, q := range e.queues {
		if q == nil {
			continue // deleted
		}
		n := 0
		for typ, l := range q.fired.lines {
			if len(l.groups) == 0 || l.typ != typ {
				r.fatalf("queue %s keeps a fired line of %d groups for type %q under %q", q.name, len(l.groups), l.typ, typ)
			}
			n += len(l.groups)
		}
		if n != q.fired.len() {
			r.fatalf("queue %s counts %d fired groups, holds %d", q.name, q.fired.len(), n)
		}
		if f := q.fired; f.fewestKnown {
			fewest, fewestN := 0, 0
			f.all(func(g *group) bool {
				switch {
				case g.live <= 0:
				case fewestN == 0 || g.live < fewest:
					fewest, fewestN = g.live, 1
				case g.live == fewest:
					fewestN++
				}
				return true
			})
			if fewestN != f.fewestN || fewestN > 0 && fewest != f.fewest {
				r.fatalf("queue %s keeps the fewest live members of a fired group as %d (of %d groups), they are %d (of %d)",
					q.name, f.fewest, f.fewestN, fewest, fewestN)
			}
		}
		q.fired.all(func(g *group) bool { groups = append(groups, g); return true })
	}
	for _, g := range groups {
		if n := membersHeld(e, g); n != g.live {
			r.fatalf("group %v counts %d members, holds %d", g.id, g.live, n)
		}
	}
	if r.op == "tick" {
		now := nanos(r.now)
		for k, at := range e.expires {
			if m, _ := e.tasks.get(k); m.state.Waiting() && at <= now {
				r.fatalf("waiting task %s (%s) expired at %d, still live at %d", k, m.state, at, now)
			}
		}
		for _, g := range e.openGroups {
			if g.firesAt <= now && membersHeld(e, g) > 0 {
				r.fatalf("open group %v due at %d not fired at %d", g.id, g.firesAt, now)
			}
		}
	}
	// leases
	for k, l := range e.leases {
		m, ok := e.tasks.get(k)
		if !ok || m.state != stateActive {
			r.fatalf("lease of %s, which is %v", k, m.state)
		}
		_ = l
	}
	if len(e.leaseHeap) != len(e.leases) {
		r.fatalf("lease heap %d, leases %d", len(e.leaseHeap), len(e.leases))
	}
}

// checkTaskLocked checks a live task's indexes against its stored status.
func (r *seqRun) checkTaskLocked(k key, m meta, st *storagev1.TaskStatus) error {
	e := r.e
	q := e.queues[m.queue]
	if q.name != st.GetQueue() {
		return fmt.Errorf("task %s in queue %s, the file says %s", k, q.name, st.GetQueue())
	}
	switch m.state {
	case statePending:
		if m.flags&(flagInReady|flagHeld) == 0 {
			return fmt.Errorf("pending task %s is neither ready nor held", k)
		}
	case stateScheduled, stateRetry:
		if !r.inTimed(&e.dueHeap, timed{at: m.due, k: k}) {
			return fmt.Errorf("%s task %s has no due entry at %d", m.state, k, m.due)
		}
		if r.op == "tick" && m.due <= nanos(r.now) {
			return fmt.Errorf("%s task %s due %d, not promoted at %d", m.state, k, m.due, nanos(r.now))
		}
		if m.due != st.GetNextProcessAt() {
			return fmt.Errorf("%s task %s due %d in memory, %d in the file", m.state, k, m.due, st.GetNextProcessAt())
		}
	case stateActive:
		if e.leases[k] == nil {
			return fmt.Errorf("active task %s has no lease", k)
		}
	case stateBlocked:
		n := 0
		for _, edges := range e.deps {
			for _, ed := range edges {
				if ed.k == k && ed.gen == e.depGen[k] {
					n++
				}
			}
		}
		if int(m.waiting) != len(st.GetWaitingOn()) {
			return fmt.Errorf("blocked task %s waits for %d in memory, %d in the file", k, m.waiting, len(st.GetWaitingOn()))
		}
		if n != int(m.waiting) {
			return fmt.Errorf("blocked task %s waits for %d, has %d current edges", k, m.waiting, n)
		}
		if m.waiting == 0 && m.flags&flagDepFailed == 0 {
			return fmt.Errorf("blocked task %s waits for nothing", k)
		}
		if (m.flags&flagDepFailed != 0) != st.GetDependencyFailed() {
			return fmt.Errorf("blocked task %s dependency failed %v in memory, %v in the file", k, m.flags&flagDepFailed != 0, st.GetDependencyFailed())
		}
	case stateAggr:
		n := 0
		for _, g := range e.openGroups {
			n += memberEntries(e, g, k)
		}
		q.fired.all(func(g *group) bool { n += memberEntries(e, g, k); return true })
		found := n == 1
		if !found {
			return fmt.Errorf("aggregating task %s is in %d groups", k, n)
		}
	}
	if m.state.Waiting() {
		at, dl := st.GetExpiresAt(), st.GetDeadline()
		if dl != 0 && (at == 0 || dl < at) {
			at = dl
		}
		if e.expires[k] != at {
			return fmt.Errorf("task %s expires at %d in memory, %d by the file", k, e.expires[k], at)
		}
		if at != 0 && !r.inTimed(&e.expHeap, timed{at: at, k: k}) {
			return fmt.Errorf("task %s has no expiry entry", k)
		}
	}
	if uk := st.GetUniqueKey(); uk != e.uniqOf[k] {
		return fmt.Errorf("task %s unique key %q in memory, %q in the file", k, e.uniqOf[k], uk)
	}
	if ck := st.GetConcurrencyKey(); ck != "" {
		if c := e.keyOf[k]; c == nil || c.name != ck {
			return fmt.Errorf("task %s concurrency key %q not in memory", k, ck)
		}
	}
	return nil
}

func fifoKeys(f *fifo) []key {
	var out []key
	for i, b := range f.blocks {
		from, to := 0, len(b.keys)
		if i == 0 {
			from = f.head
		}
		if i == len(f.blocks)-1 {
			to = f.tail
		}
		out = append(out, b.keys[from:to]...)
	}
	if len(out) != f.n {
		panic(fmt.Sprintf("fifo of %d keys walks %d", f.n, len(out)))
	}
	return out
}

// memberEntries counts g's entries that stand for k.
func memberEntries(e *Engine, g *group, k key) int {
	n := 0
	for _, x := range g.members {
		if _, ok := e.memberLocked(x); ok && x.k == k {
			n++
		}
	}
	return n
}

func (r *seqRun) inTimed(x *timedIndex, t timed) bool {
	for _, h := range []timedHeap{x.heap, x.old} {
		for _, y := range h {
			if y == t {
				return true
			}
		}
	}
	return false
}

// TestSequencesKeepMemoryAndFileInStep runs seeded random sequences of
// calls and checks, after each, that memory and file agree, and at each
// reopen that the rebuilt state is the one before.
func TestSequencesKeepMemoryAndFileInStep(t *testing.T) {
	t.Parallel()
	for seed := range uint64(12) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			r := &seqRun{t: t, rng: rand.New(rand.NewPCG(seed, 7)), path: filepath.Join(t.TempDir(), "c.db"), now: bt.T0}
			r.open()
			defer func() { _ = r.e.Close() }()
			for r.step = 0; r.step < 300; r.step++ {
				r.do()
				r.check()
			}
			r.op = "final reopen"
			r.reopen()
			r.check()
		})
	}
}

// TestConcurrentCallsKeepMemoryAndFileInStep runs several seeded
// sequences at once on one engine, then checks that memory and file agree
// and that a reopen rebuilds the same state.
func TestConcurrentCallsKeepMemoryAndFileInStep(t *testing.T) {
	t.Parallel()
	for seed := range uint64(3) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			main := &seqRun{t: t, rng: rand.New(rand.NewPCG(seed, 11)), path: filepath.Join(t.TempDir(), "c.db"), now: bt.T0}
			main.open()
			defer func() { _ = main.e.Close() }()
			var clock atomic.Int64
			clock.Store(bt.T0.UnixNano())
			const runners = 6
			errs := make(chan string, runners)
			for i := range runners {
				go func() {
					r := &seqRun{t: t, rng: rand.New(rand.NewPCG(seed, uint64(100+i))), e: main.e, now: bt.T0, shared: true, clock: &clock}
					defer func() {
						if p := recover(); p != nil {
							errs <- fmt.Sprint(p)
							return
						}
						errs <- ""
					}()
					for r.step = 0; r.step < 300; r.step++ {
						r.do()
					}
					// Hand back what this runner holds, so that the
					// reopen below compares like with like.
					r.op = "release all"
					var refs []broker.LeaseRef
					for _, l := range r.leases {
						refs = append(refs, bt.Ref(l))
					}
					_ = r.e.Release(context.Background(), broker.ReleaseParams{SessionID: "s", Leases: refs, Now: r.now})
				}()
			}
			for range runners {
				if msg := <-errs; msg != "" {
					t.Fatal(msg)
				}
			}
			main.now = time.Unix(0, clock.Load()).UTC()
			main.op = "after the runners"
			main.check()
			main.reopen()
			main.check()
		})
	}
}

// membersHeld counts g's entries that stand for a task still in it, by
// scanning them: what group.live must say.
func membersHeld(e *Engine, g *group) int {
	n := 0
	for _, x := range g.members {
		if _, ok := e.memberLocked(x); ok {
			n++
		}
	}
	return n
}
