package postgres

// TasksReady fires when a queue's ready count leaves 0: a session that
// found nothing sleeps until then. A session whose route passes tasks over
// (broker.Route) may find nothing while the count never went to 0: the
// tasks waiting are not for it. So once a routed lease comes back short
// while the queue has ready tasks, the queue is marked passed over until
// its ready count is back at 0, and while it is, each task that becomes
// ready signals TasksReady (applyDeltaLocked), this node's commits and
// the other nodes' alike. A routed lease in progress counts as a mark:
// a task that becomes ready after its statement's snapshot and before its
// end is signaled too, so that the session it found nothing for hears of
// it.

// routingStarted records a routed lease of queue in progress.
func (e *Engine) routingStarted(queue string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if q := e.hints.queues[queue]; q != nil {
		q.routing++
	}
}

// routingEnded records the end of a routed lease of queue, and marks the
// queue passed over when it came back short while the queue had ready
// tasks.
func (e *Engine) routingEnded(queue string, short bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	q := e.hints.queues[queue]
	if q == nil {
		return
	}
	q.routing = max(q.routing-1, 0)
	if short && q.ready > 0 {
		q.passedOver = true
	}
}

// passedOverLocked reports whether d, which q's ready count was just
// changed by, owes q's sessions a TasksReady because q is marked passed
// over (or a routed lease of it is in progress), and clears the mark once
// q has no ready task left.
func passedOverLocked(q *queueHint, d *queueDelta) bool {
	signal := d.ready > 0 && (q.passedOver || q.routing > 0)
	if q.ready <= 0 {
		q.passedOver = false
	}
	return signal
}
