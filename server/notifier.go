package server

import (
	"sync/atomic"

	"github.com/conveyor-dev/conveyor/scheduler"
)

// notifier forwards the broker's signals: new ready work wakes the
// sessions serving the queue, and an earlier timer wakes the timer loops.
// It is created before the broker opens and wired right after.
type notifier struct {
	hub   atomic.Pointer[hub]
	loops atomic.Pointer[[]*scheduler.Loop]
}

func (n *notifier) set(h *hub, loops []*scheduler.Loop) {
	n.hub.Store(h)
	n.loops.Store(&loops)
}

// TasksReady wakes the sessions serving queue.
func (n *notifier) TasksReady(queue string) {
	if h := n.hub.Load(); h != nil {
		h.wakeQueue(queue)
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
