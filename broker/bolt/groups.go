package bolt

import (
	"context"
	"math"
	"slices"
	"sort"

	"github.com/conveyor-dev/conveyor/broker"
)

// This file is aggregation groups (protocol §5.11). An AGGREGATING task
// joins the open group of its (queue, group, type) once its enqueue is
// durable. A group fires when it reaches its policy's size (or
// broker.MaxGroupBytes of specs), or when its
// time (GroupPolicy.FiresAt) comes, from a time-ordered heap that
// PromoteDue drains; a fired group waits, closed, until a session that
// handles its type leases it as one batch. Members stay AGGREGATING until
// then; one that leaves meanwhile (canceled, deleted, expired) is skipped,
// and one whose expiry or deadline passed is archived at the lease. A
// member that leaves an open group takes its bytes with it, and the
// group's delay counts from its oldest member still there (a group left
// with none is dropped: the next member starts a new one).

// groupID names the groups of one (queue, group, type).
type groupID struct {
	queue uint16
	name  string
	typ   string
}

// group is one instance of a (queue, group, type): open while it gathers,
// then fired.
type group struct {
	id      groupID
	members []member
	live    int // the members still AGGREGATING
	bytes   int // the live members' specs, as stored (once fired: as it fired)
	// first is the earliest enqueue of its members, last the latest:
	// its delay counts from first, its grace period from last (the last
	// arrival, even if that member left since: the grace is for quiet).
	// While firstLeft is set, a member that may have been the first left,
	// and first may be earlier than the earliest of those still there;
	// the group's time is then checked when it comes (fireDueLocked).
	first, last int64
	firstLeft   bool
	firesAt     int64 // by time; when it fired, once fired
	fired       bool
	fireSeq     uint64 // its place among its queue's fired groups (firedGroups)
	gen         uint64 // bumped when firesAt moves: older heap entries are stale
}

// member is a task that joined a group, of incarnation gen
// (Engine.memberGen): a member that left (leased with its group,
// canceled, deleted, expired) keeps its entry, which must not count for a
// later task given the same id by its producer.
type member struct {
	k   key
	gen uint32
}

// memberOf is the group an AGGREGATING task joined, its incarnation, and
// what it brought: its spec's bytes and its enqueue time.
type memberOf struct {
	g    *group
	gen  uint32
	size int32
	enq  int64
}

// memberLocked reports whether entry x of a group stands for a live
// AGGREGATING task, the one that joined, and returns its meta.
func (e *Engine) memberLocked(x member) (meta, bool) {
	m, live := e.tasks.get(x.k)
	return m, live && m.state == stateAggr && e.memberGen[x.k].gen == x.gen
}

// leftGroupLocked is called when task k leaves AGGREGATING: its entry in
// its group is stale from now on, and the group holds one member less. An
// open group loses the member's bytes, and its time may move later (if
// the member was its first); one left with no member is dropped.
func (e *Engine) leftGroupLocked(k key) {
	j, ok := e.memberGen[k]
	if !ok {
		return
	}
	delete(e.memberGen, k)
	g := j.g
	g.live--
	switch {
	case g.fired:
		e.queues[g.id.queue].fired.shrank(g.live+1, g.live)
	case g.live == 0:
		e.dropOpenGroupLocked(g)
	default:
		g.bytes -= int(j.size)
		g.firstLeft = g.firstLeft || j.enq <= g.first
	}
}

// dropOpenGroupLocked forgets an open group none of whose members is left:
// its timer entries go stale.
func (e *Engine) dropOpenGroupLocked(g *group) {
	delete(e.openGroups, g.id)
	g.members, g.bytes = nil, 0
	g.gen++
}

// regatherLocked finds open group g's first enqueue among the members
// still there, after one that may have been the first left, and drops
// the entries of those that left (one pass, paid for by the departures
// since the last one).
func (e *Engine) regatherLocked(g *group) {
	kept := g.members[:0]
	first := int64(math.MaxInt64)
	for _, x := range g.members {
		if j, ok := e.memberGen[x.k]; ok && j.gen == x.gen {
			kept = append(kept, x)
			first = min(first, j.enq)
		}
	}
	clear(g.members[len(kept):])
	g.members, g.first, g.firstLeft = kept, first, false
}

// groupTimer is a group's entry in the fire heap.
type groupTimer struct {
	at  int64
	g   *group
	gen uint64
}

// policyLocked is q's effective group policy.
func (e *Engine) policyLocked(q *queue) broker.GroupPolicy {
	return q.cfg.Group.WithDefaults(e.cfg.GroupDefaults)
}

// joinGroupLocked adds a durable AGGREGATING task, whose stored spec takes
// size bytes, to its open group.
func (e *Engine) joinGroupLocked(k key, q *queue, name, typ string, size int, enqueued, now int64) {
	id := groupID{queue: q.index, name: name, typ: typ}
	g := e.openGroups[id]
	if g == nil {
		g = &group{id: id, first: enqueued}
		e.openGroups[id] = g
	}
	e.memberGens++
	e.memberGen[k] = memberOf{g: g, gen: e.memberGens, size: int32(min(size, math.MaxInt32)), enq: enqueued}
	g.members = append(g.members, member{k: k, gen: e.memberGens})
	g.live++
	g.bytes += size
	g.last = max(g.last, enqueued)
	g.first = min(g.first, enqueued)
	p := e.policyLocked(q)
	if p.Full(g.live, int64(g.bytes)) {
		e.fireLocked(g, now)
		return
	}
	e.retimeGroupLocked(g, e.groupTimeLocked(g))
}

// retimeGroupLocked sets when open group g fires by time.
func (e *Engine) retimeGroupLocked(g *group, at int64) {
	if at == g.firesAt {
		return
	}
	g.firesAt = at
	g.gen++
	if e.groupHeap.add(groupTimer{at: at, g: g, gen: g.gen}) {
		e.note.TimersChanged()
	}
}

// policyChangedLocked applies q's group policy, just changed, to its
// groups still gathering: each gets the time the new policy gives it, and
// one that is Full under it is due at once, so the next
// PromoteDue fires it (the engine has no clock of its own). It visits
// every open group, as an operator's configuration change may.
func (e *Engine) policyChangedLocked(q *queue) {
	p := e.policyLocked(q)
	for id, g := range e.openGroups {
		if id.queue != q.index {
			continue
		}
		at := nanos(p.FiresAt(fromNanos(g.first), fromNanos(g.last)))
		if p.Full(g.live, int64(g.bytes)) {
			at = min(at, g.first)
		}
		e.retimeGroupLocked(g, at)
	}
}

// fireLocked closes a group: it waits for a session of its type.
func (e *Engine) fireLocked(g *group, now int64) {
	if g.fired {
		return
	}
	delete(e.openGroups, g.id)
	g.fired, g.firesAt = true, now
	g.gen++
	q := e.queues[g.id.queue]
	q.fired.push(g)
	if !q.paused {
		e.note.TasksReady(q.name)
	}
}

// fireDueLocked fires the groups whose time came by now and returns when
// the next one is due (0: none). A group whose first member may have left
// is timed again from the members still there, and fires only if its
// time still came.
func (e *Engine) fireDueLocked(now int64) int64 {
	for {
		t, ok := e.groupHeap.peek()
		if !ok {
			return 0
		}
		current := !t.g.fired && t.gen == t.g.gen
		if current && t.at > now {
			return t.at
		}
		e.groupHeap.pop()
		if !current {
			continue
		}
		if g := t.g; g.firstLeft {
			e.regatherLocked(g)
			if at := e.groupTimeLocked(g); at > now {
				e.retimeGroupLocked(g, at)
				continue
			}
		}
		e.fireLocked(t.g, now)
	}
}

// groupTimeLocked is when open group g fires by time, by its queue's
// policy.
func (e *Engine) groupTimeLocked(g *group) int64 {
	p := e.policyLocked(e.queues[g.id.queue])
	return nanos(p.FiresAt(fromNanos(g.first), fromNanos(g.last)))
}

// expireMembersLocked archives g's members whose expiry or deadline
// passed by now, as Lease does on a pop (they must not run), and returns
// how many members are left.
func (e *Engine) expireMembersLocked(g *group, now int64) int {
	n := 0
	for _, x := range g.members {
		m, ok := e.memberLocked(x)
		if !ok || e.expiredLocked(x.k, m, now) {
			continue
		}
		n++
	}
	return n
}

// firedGroupFitsLocked reports whether the room under q's cap on ACTIVE
// tasks holds what a fired group of q needs: its live members, or the
// whole cap for a group larger than it (which goes in parts, see
// broker.QueueConfig.BatchSize). The room grows as tasks leave ACTIVE
// (leftActiveLocked) and the need shrinks as members leave the group
// (groupShrankLocked): either wakes the sessions once a group fits.
func (e *Engine) firedGroupFitsLocked(q *queue, room int64) bool {
	fewest, ok := q.fired.fewestLive()
	return ok && room > 0 && int64(q.cfg.BatchSize(fewest)) <= room
}

// groupShrankLocked is called when an AGGREGATING task of q leaves its
// group other than by being leased with it (canceled, deleted, expired):
// a fired group waiting for room under the cap may fit now, and one whose
// tokens the rate bucket holds may have no members left to spend them.
func (e *Engine) groupShrankLocked(q *queue) {
	e.dropEmptyHoldLocked(q)
	if q.cfg.MaxActive <= 0 || q.paused || q.fired.len() == 0 {
		return
	}
	if e.firedGroupFitsLocked(q, q.cfg.ActiveRoom(q.counts[stateActive])) {
		e.note.TasksReady(q.name)
	}
}

// ReadyGroups reports fired groups waiting per queue; see broker.Broker.
func (e *Engine) ReadyGroups(queues, types []string, counts []int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for i, name := range queues {
		counts[i] = 0
		if q := e.byName[name]; q != nil && !q.paused {
			counts[i] = q.fired.waiting(types)
		}
	}
}

// LeaseGroups leases fired groups as batches; see broker.Broker.
func (e *Engine) LeaseGroups(ctx context.Context, p broker.GroupLeaseParams) ([]broker.GroupLease, error) {
	now := p.Now.UnixNano()
	expiry := satAdd(now, p.TTL)
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil, errClosed
	}
	q := e.byName[p.Queue]
	if q == nil || q.paused {
		e.mu.Unlock()
		return nil, nil
	}
	var out []broker.GroupLease
	var keys []key
	var starts []int64
	scan := q.fired.scan(p.Types)
	for len(out) < p.N {
		g, line, ok := scan.next()
		if !ok {
			break
		}
		n := e.expireMembersLocked(g, now)
		if n == 0 {
			continue // every member left, or expired: the group is dropped, not sent empty
		}
		n = q.cfg.BatchSize(n)
		if int64(n) > q.cfg.ActiveRoom(q.counts[stateActive]) {
			scan.keep(line, g) // no room under the cap for the whole batch yet
			continue
		}
		if !e.groupTokensLocked(q, g, n, p.Now) {
			scan.keep(line, g) // the rate limit lets it go later, and the younger ones after it
			break
		}
		gl := broker.GroupLease{Queue: q.name, Group: g.id.name, Type: g.id.typ}
		taken := 0
		for i, x := range g.members {
			if len(gl.Leases) == n {
				break
			}
			taken = i + 1
			m, ok := e.memberLocked(x)
			if !ok {
				continue // left the group meanwhile
			}
			keys = append(keys, x.k)
			starts = append(starts, now)
			l := e.grantLocked(x.k, &m, p.SessionID, now, expiry)
			// A member is ready from when its group fired: the time it
			// spent gathering is the aggregation's, asked for.
			l.Task.NextProcessAt = fromNanos(max(m.due, g.firesAt))
			gl.Leases = append(gl.Leases, l)
		}
		e.tookLocked(q, len(gl.Leases), p.Now)
		out = append(out, gl)
		if g.members = g.members[taken:]; len(g.members) > 0 {
			scan.keep(line, g) // the rest of a group larger than the cap, next
		}
	}
	scan.done()
	e.persistStartsLocked(keys, starts, false)
	e.mu.Unlock()
	for i := range out {
		filled, err := e.fillSpecs(out[i].Leases)
		if err != nil {
			for _, gl := range out {
				e.releaseUnsent(p.SessionID, gl.Leases, p.Now)
			}
			return nil, err
		}
		out[i].Leases = filled
		e.limitLeases(out[i].Leases, p.Now, p.LimitGrace)
	}
	// A batch whose every member was left out (their specs are missing)
	// is not a batch: it would take a slot no Result can free.
	return slices.DeleteFunc(out, func(gl broker.GroupLease) bool { return len(gl.Leases) == 0 }), nil
}

// Groups lists waiting groups; see broker.Broker.
func (e *Engine) Groups(_ context.Context, queue string) ([]broker.GroupInfo, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, errClosed
	}
	var out []broker.GroupInfo
	add := func(g *group) {
		q := e.queues[g.id.queue]
		if queue != "" && q.name != queue {
			return
		}
		n, first := 0, g.first
		for _, x := range g.members {
			if _, ok := e.memberLocked(x); ok {
				n++
			}
		}
		if n == 0 {
			return
		}
		firesAt := g.firesAt
		if g.firstLeft && !g.fired {
			e.regatherLocked(g)
			first, firesAt = g.first, e.groupTimeLocked(g)
			e.retimeGroupLocked(g, firesAt)
		}
		out = append(out, broker.GroupInfo{Queue: q.name, Group: g.id.name, Type: g.id.typ, Size: n,
			First: fromNanos(first), Last: fromNanos(g.last), FiresAt: fromNanos(firesAt), Fired: g.fired})
	}
	for _, g := range e.openGroups {
		add(g)
	}
	for _, q := range e.byName {
		q.fired.all(func(g *group) bool { add(g); return true })
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Queue != b.Queue {
			return a.Queue < b.Queue
		}
		if a.Group != b.Group {
			return a.Group < b.Group
		}
		if a.Type != b.Type {
			return a.Type < b.Type
		}
		return a.Fired && !b.Fired // the fired instance first
	})
	return out, nil
}

// groupHeap orders groups by fire time (lazy deletion by gen).
type groupHeap []groupTimer

func (h groupHeap) peek() (groupTimer, bool) {
	if len(h) == 0 {
		return groupTimer{}, false
	}
	return h[0], true
}

func (h *groupHeap) add(t groupTimer) bool {
	*h = append(*h, t)
	h.up(len(*h) - 1)
	return (*h)[0].g == t.g && (*h)[0].gen == t.gen
}

func (h *groupHeap) pop() {
	old := *h
	n := len(old) - 1
	old[0] = old[n]
	old[n] = groupTimer{}
	*h = old[:n]
	if n > 0 {
		h.down(0)
	}
}

func (h groupHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if h[p].at <= h[i].at {
			return
		}
		h[p], h[i] = h[i], h[p]
		i = p
	}
}

func (h groupHeap) down(i int) {
	for {
		l, best := 2*i+1, i
		if l < len(h) && h[l].at < h[best].at {
			best = l
		}
		if r := l + 1; r < len(h) && h[r].at < h[best].at {
			best = r
		}
		if best == i {
			return
		}
		h[i], h[best] = h[best], h[i]
		i = best
	}
}
