package bolt

import (
	"context"
	"slices"
	"strings"

	"github.com/conveyor-dev/conveyor/broker"
)

// Routing (broker.Route). Every task carries its kind (its type, and
// whether it is at most once), interned to a number in meta.kind. A lease
// whose route takes everything pops the queue's ready FIFOs as it always
// did. A routed lease pops them too, and moves each task it cannot take
// to its queue's passed-over line for the task's kind, where it keeps its
// place (priority, then the order it was passed over in, which is the
// order it became ready in) and stays ready: leases that can take it look
// there first. A task is passed over at most once per stay in the ready
// line, so routing costs no scan: each pop is a constant amount of work
// more, and a queue no routed lease ever passed over costs nothing more.

// kindID numbers a broker.Kind within this process (meta.kind).
type kindID uint32

// kindLocked returns the number of typ's kind, interning it.
func (e *Engine) kindLocked(typ string, atMostOnce bool) kindID {
	k := broker.Kind{Type: typ, AtMostOnce: atMostOnce}
	if id, ok := e.kindIDs[k]; ok {
		return id
	}
	id := kindID(len(e.kinds))
	e.kinds = append(e.kinds, k)
	e.kindIDs[k] = id
	return id
}

// maxPassedOver bounds how many tasks one Lease moves to passed-over
// lines: it holds the lock for a bounded time even when a routed lease
// finds a deep queue of kinds it cannot take, and wakes the queue's
// sessions to go on (each pass costs the next lease nothing again).
const maxPassedOver = 4096

// passedLine is a queue's passed-over tasks of one kind.
type passedLine struct {
	kind  kindID
	ready [10]fifo
	// n counts its valid entries (tasks with flagPassed).
	n int
}

// router decides, for one Lease call, which kinds its route takes.
type router struct {
	route broker.Route
	open  bool
	takes map[kindID]bool
	// passed counts the tasks this call moved to passed-over lines.
	passed int
}

func newRouter(r broker.Route) *router {
	return &router{route: r, open: r.Open()}
}

func (e *Engine) routerTakes(rt *router, kind kindID) bool {
	if rt.open {
		return true
	}
	if t, ok := rt.takes[kind]; ok {
		return t
	}
	if rt.takes == nil {
		rt.takes = make(map[kindID]bool)
	}
	k := e.kinds[kind]
	t := rt.route.Takes(k.Type, k.AtMostOnce)
	rt.takes[kind] = t
	return t
}

// popRoutedLocked takes the next ready task of q that rt takes: highest
// priority first; within a priority, passed-over tasks (the older) before
// the rest, FIFO within each. Tasks it cannot take on the way are passed
// over, up to maxPassedOver a call.
func (e *Engine) popRoutedLocked(q *queue, rt *router) (key, meta, bool) {
	if rt.open && q.passedN == 0 {
		return e.popReadyLocked(q) // the unrouted path, unchanged
	}
	for p := len(q.ready) - 1; p >= 0; p-- {
		if k, m, ok := e.popPassedLocked(q, rt, p); ok {
			return k, m, true
		}
		for f := q.readyHead(p); f.len() > 0; f = q.readyHead(p) {
			if rt.passed >= maxPassedOver {
				e.note.TasksReady(q.name) // go on in the next lease
				return key{}, meta{}, false
			}
			k, _ := f.pop()
			m, live := e.tasks.get(k)
			if !live || !m.readyIn(q, p) {
				continue
			}
			if !e.routerTakes(rt, m.kind) {
				e.passOverLocked(q, k, m)
				rt.passed++
				continue
			}
			e.takenLocked(q, k, &m)
			return k, m, true
		}
	}
	return key{}, meta{}, false
}

// popPassedLocked takes the first task of priority p among the passed-over
// lines rt takes.
func (e *Engine) popPassedLocked(q *queue, rt *router, p int) (key, meta, bool) {
	for _, line := range q.passed {
		if line.ready[p].len() == 0 || !e.routerTakes(rt, line.kind) {
			continue
		}
		for f := &line.ready[p]; f.len() > 0; {
			k, _ := f.pop()
			m, live := e.tasks.get(k)
			if !live || !m.passedIn(q, p, line.kind) {
				continue
			}
			m.flags &^= flagPassed
			e.passedLeftLocked(q, line)
			e.takenLocked(q, k, &m)
			return k, m, true
		}
	}
	return key{}, meta{}, false
}

// passOverLocked moves ready task k, just popped from q's ready FIFO, to
// the passed-over line of its kind.
func (e *Engine) passOverLocked(q *queue, k key, m meta) {
	line := q.passedLine(m.kind)
	line.ready[m.prio].push(k)
	line.n++
	q.passedN++
	m.flags |= flagPassed
	e.tasks.put(k, m)
}

// passedLine returns q's passed-over line of kind, adding it.
func (q *queue) passedLine(kind kindID) *passedLine {
	for _, line := range q.passed {
		if line.kind == kind {
			return line
		}
	}
	line := &passedLine{kind: kind}
	q.passed = append(q.passed, line)
	return line
}

// passedLeftLocked is told that a valid entry of line left it (popped,
// or its task left the ready line): an emptied line goes.
func (e *Engine) passedLeftLocked(q *queue, line *passedLine) {
	line.n--
	q.passedN--
	if line.n > 0 {
		return
	}
	for p := range line.ready {
		line.ready[p].free()
	}
	q.passed = slices.DeleteFunc(q.passed, func(l *passedLine) bool { return l == line })
}

// unpassLocked withdraws a passed-over task that leaves the ready line
// without being popped; its entry stays, stale.
func (e *Engine) unpassLocked(q *queue, m *meta) {
	m.flags &^= flagPassed
	for _, line := range q.passed {
		if line.kind == m.kind {
			e.passedLeftLocked(q, line)
			return
		}
	}
}

// freePassed releases every passed-over line of q.
func (q *queue) freePassed() {
	for _, line := range q.passed {
		for p := range line.ready {
			line.ready[p].free()
		}
	}
	q.passed, q.passedN = nil, 0
}

// passedIn reports whether an entry of q's passed-over line of kind at
// priority p is valid for the live task whose meta is m.
func (m *meta) passedIn(q *queue, p int, kind kindID) bool {
	return m.state == statePending && m.flags&(flagInReady|flagPassed) == flagInReady|flagPassed &&
		m.queue == q.index && int(m.prio) == p && m.kind == kind
}

// WaitingKinds lists the kinds of q's passed-over tasks; see
// broker.KindLister.
func (e *Engine) WaitingKinds(_ context.Context, queue string) ([]broker.Kind, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, errClosed
	}
	q := e.byName[queue]
	if q == nil {
		return nil, nil
	}
	var out []broker.Kind
	for _, line := range q.passed {
		out = append(out, e.kinds[line.kind])
	}
	slices.SortFunc(out, compareKinds)
	if len(out) > broker.MaxWaitingKinds {
		out = out[:broker.MaxWaitingKinds]
	}
	return out, nil
}

func compareKinds(x, y broker.Kind) int {
	if c := strings.Compare(x.Type, y.Type); c != 0 {
		return c
	}
	switch {
	case x.AtMostOnce == y.AtMostOnce:
		return 0
	case !x.AtMostOnce:
		return -1
	}
	return 1
}
