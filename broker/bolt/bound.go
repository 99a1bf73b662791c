package bolt

import "github.com/conveyor-dev/conveyor/broker"

// This file is the queues' bound on waiting tasks (QueueConfig.MaxWaiting).
// The check is made under the engine lock, against the in-memory counts,
// which include the enqueues not durable yet: two enqueues cannot both
// take the last room. It costs an unbounded queue one branch per task
// while no queue at all is bounded (Engine.bounded is 0).
//
// A queue that refused a task is marked (queue.refused); while the mark
// is set, every change that leaves the queue room tells
// Notifier.QueueRoom, whose answer (nobody waits any more) clears it. So
// producers waiting for room are woken by the change that made it, and a
// queue nobody waits on costs nothing.

// roomLocked refuses n new tasks of the named queue if they would take it
// past its bound, and marks the queue so that its next room is signalled.
// Call it only when e.bounded > 0.
func (e *Engine) roomLocked(name string, n int) error {
	q := e.byName[name]
	if q == nil || q.cfg.Admits(q.counts.Waiting(), n) {
		return nil
	}
	q.refused = true
	return &broker.QueueFullError{Queue: name, MaxWaiting: q.cfg.MaxWaiting}
}

// roomChangedLocked tells the notifier of the room q has, if q refused a
// task and the notifier has not answered since that nobody waits. The
// callers are every change that may make room: a task leaving the waiting
// states (setStateLocked, beginFinishLocked, deleteLiveLocked), the bound
// raised or removed, and a reload of memory (an enqueue whose commit
// failed is gone).
func (e *Engine) roomChangedLocked(q *queue) {
	if !q.refused {
		return
	}
	if room := q.cfg.Room(q.counts.Waiting()); room > 0 {
		q.refused = e.note.QueueRoom(q.name, room)
	}
}

// boundChangedLocked follows a change of q's bound from old: it keeps the
// count of bounded queues, and signals the room a raised or removed bound
// makes.
func (e *Engine) boundChangedLocked(q *queue, old int64) {
	switch now := q.cfg.MaxWaiting; {
	case old <= 0 && now > 0:
		e.bounded++
	case old > 0 && now <= 0:
		e.bounded--
	}
	e.roomChangedLocked(q)
}

// txRoomLocked refuses an EnqueueTx whose new tasks (the items that are
// not existing ids) would take any queue past its bound: the first such
// queue, in item order, is named. Call it only when e.bounded > 0.
func (e *Engine) txRoomLocked(pend []pendingTask) error {
	var need map[string]int
	for i := range pend {
		pt := &pend[i]
		if pt.existing {
			continue
		}
		if q := e.byName[pt.nt.Queue]; q != nil && q.cfg.MaxWaiting > 0 {
			if need == nil {
				need = map[string]int{}
			}
			need[pt.nt.Queue]++
		}
	}
	for i := range pend {
		if n := need[pend[i].nt.Queue]; n > 0 && !pend[i].existing {
			if err := e.roomLocked(pend[i].nt.Queue, n); err != nil {
				return err
			}
		}
	}
	return nil
}

// reloadedBoundsLocked recounts the bounded queues once memory was
// rebuilt from the file, and marks each as having refused: the marks of
// refusals made before are gone, and their producers may still wait.
func (e *Engine) reloadedBoundsLocked() {
	e.bounded = 0
	for _, q := range e.byName {
		if q.cfg.MaxWaiting > 0 {
			e.bounded++
			q.refused = true
		}
	}
}

// signalRoomLocked signals room in every bounded queue that has some,
// after a failed commit dropped enqueues that held it (and memory was
// reloaded).
func (e *Engine) signalRoomLocked() {
	if e.bounded == 0 {
		return
	}
	for _, q := range e.byName {
		e.roomChangedLocked(q)
	}
}
