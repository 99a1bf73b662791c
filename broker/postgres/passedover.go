package postgres

// TasksReady fires when a queue's ready count leaves 0: a session that
// found nothing sleeps until then. A session whose route passes tasks over
// (broker.Route) may find nothing while the count never went to 0: the
// tasks waiting are not for it. So once a routed lease comes back short
// while the queue has ready tasks, the queue is marked passed over until
// its ready count is back at 0, and while it is, each task that becomes
// ready signals TasksReady (applyDeltaLocked), this node's commits and
// the other nodes' alike. A task that became ready while the short lease
// ran (after its statement's snapshot, before the mark) is signaled when
// the lease ends: each queue counts the changes that made tasks ready.

// routingStarted records the start of a routed lease of queue, before its
// statement runs, and returns the queue's count of ready changes then.
func (e *Engine) routingStarted(queue string) uint64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	if q := e.hints.queues[queue]; q != nil {
		return q.readyChanges
	}
	return 0
}

// routingEnded records the end of a routed lease of queue that started
// when the queue had counted since ready changes: when it came back short
// while the queue has ready tasks, the queue is marked passed over, and
// signaled if tasks became ready meanwhile (the lease may not have seen
// them).
func (e *Engine) routingEnded(queue string, short bool, since uint64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	q := e.hints.queues[queue]
	if q == nil || !short || q.ready <= 0 {
		return
	}
	q.passedOver = true
	if q.readyChanges != since && !q.paused {
		e.note.TasksReady(queue)
	}
}

// passedOverLocked counts d, which just changed q's ready count, and
// reports whether it owes q's sessions a TasksReady because q is marked
// passed over; it clears the mark once q has no ready task left.
func passedOverLocked(q *queueHint, d *queueDelta) bool {
	if d.ready > 0 {
		q.readyChanges++
	}
	signal := d.ready > 0 && q.passedOver
	if q.ready <= 0 {
		q.passedOver = false
	}
	return signal
}
