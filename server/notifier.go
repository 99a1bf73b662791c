package server

import (
	"sync/atomic"

	"github.com/conveyor-dev/conveyor/broker"
	"github.com/conveyor-dev/conveyor/scheduler"
	"github.com/conveyor-dev/conveyor/server/push"
	"github.com/conveyor-dev/conveyor/server/sessions"
)

// notifier forwards the broker's signals: those about worker sessions to
// the session hub (each to the one method of sessions.Hub that takes it)
// and to the push endpoints (push.Pool, the same methods),
// an earlier timer to the timer loops, room in a full queue to the
// enqueues waiting for it. It is created before the broker opens and
// wired right after.
type notifier struct {
	hub   atomic.Pointer[sessions.Hub]
	push  atomic.Pointer[push.Pool]
	loops atomic.Pointer[[]*scheduler.Loop]
	cron  atomic.Pointer[scheduler.Loop]
	// rooms are the enqueues waiting for room in a full queue.
	rooms roomWaits
}

// set names the services the signals wake: the hub, the loops that follow
// the broker's timers, and the cron loop.
func (n *notifier) set(h *sessions.Hub, p *push.Pool, loops []*scheduler.Loop, cron *scheduler.Loop) {
	n.hub.Store(h)
	n.push.Store(p)
	n.loops.Store(&loops)
	n.cron.Store(cron)
}

// TasksReady wakes the sessions serving queue, and its push endpoint.
func (n *notifier) TasksReady(queue string) {
	if h := n.hub.Load(); h != nil {
		h.TasksReady(queue)
	}
	if p := n.push.Load(); p != nil {
		p.TasksReady(queue)
	}
}

// LeaseLapsed tells the session that held the lease (under the broker's
// lock, before the task can be redelivered).
func (n *notifier) LeaseLapsed(l broker.LapsedLease) {
	if h := n.hub.Load(); h != nil {
		h.LeaseLapsed(l)
	}
	if p := n.push.Load(); p != nil {
		p.LeaseLapsed(l)
	}
}

// RunningCanceled tells the session holding l, if it is on this node,
// that an operator canceled its task through another node.
func (n *notifier) RunningCanceled(l broker.LapsedLease) {
	if h := n.hub.Load(); h != nil {
		h.RunningCanceled(l)
	}
	if p := n.push.Load(); p != nil {
		p.RunningCanceled(l)
	}
}

// TimersChanged wakes every timer loop.
func (n *notifier) TimersChanged() {
	if l := n.loops.Load(); l != nil {
		for _, loop := range *l {
			loop.Kick()
		}
	}
}

// CronsChanged wakes the cron scheduler.
func (n *notifier) CronsChanged() {
	if c := n.cron.Load(); c != nil {
		c.Kick()
	}
}

// QueueRoom wakes the enqueues waiting for room in queue, and says
// whether any waits.
func (n *notifier) QueueRoom(queue string, room int64) bool {
	return n.rooms.signal(queue, room)
}
