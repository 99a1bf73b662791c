package conveyor

import "time"

// A Worker's capacity is its concurrency less its orphans: the handlers
// still running from sessions that ended. When a session is lost, its
// handlers are canceled (cause ErrSessionLost), but one that ignores its
// context goes on, and the Worker never runs more than its concurrency of
// handlers at once, orphans included. A session must still be able to run
// every task the server may send it (protocol §5.5: as many as its Hello
// declared), so each session declares only the capacity free when it
// opens, and runs its tasks in slots of its own, as many as it declared:
// no task of it ever waits behind an orphan. When orphans hold every slot,
// the Worker says no Hello until one returns: the server then leases
// nothing to it that could not start, and other workers may run the tasks.
// Before it narrows a Hello at all, it gives the orphans a moment to
// return (orphanGrace): a handler that honours its context usually does.
//
// A slot an orphan frees later is the next session's: the session that
// opened without it keeps the concurrency it declared, since the protocol
// has no way to raise it (Credit cannot pass the declared concurrency),
// and ending a session to declare more would cancel its running handlers
// and hand their tasks back to be run again.

// addOrphans counts n handlers of a session that just ended.
func (w *Worker) addOrphans(n int) {
	if n == 0 {
		return
	}
	w.orphanMu.Lock()
	defer w.orphanMu.Unlock()
	w.orphans += n
}

// orphanReturned counts one orphan gone, and wakes a wait for capacity.
func (w *Worker) orphanReturned() {
	w.orphanMu.Lock()
	defer w.orphanMu.Unlock()
	w.orphans--
	close(w.orphanGone)
	w.orphanGone = make(chan struct{})
}

// capacity returns how many handlers the Worker may start now (its
// concurrency less its orphans), and a channel closed when an orphan
// returns.
func (w *Worker) capacity() (int, <-chan struct{}) {
	w.orphanMu.Lock()
	defer w.orphanMu.Unlock()
	return w.cfg.concurrency - w.orphans, w.orphanGone
}

// orphanGrace is how long a new session waits for the handlers of a lost
// one to return before it declares less concurrency. Most return within
// moments of their cancellation, while the reconnect may come at once (its
// first delay is a jittered fraction of a second); a session that opened
// while they unwound would run short of them for as long as it lasts.
const orphanGrace = 2 * time.Second

// awaitCapacity waits until the Worker may start at least one handler and
// returns how many: the concurrency the next Hello declares. While
// orphans hold slots it waits up to orphanGrace for them to return, and
// past that declares what is free, or goes on waiting while nothing is. It
// returns false if the Worker stops first.
func (w *Worker) awaitCapacity() (int, bool) {
	n, gone := w.capacity()
	if n == w.cfg.concurrency {
		return n, true
	}
	w.log.Info("waiting for the handlers of a lost session to return before reconnecting",
		"orphans", w.cfg.concurrency-n, "grace", orphanGrace)
	grace := time.NewTimer(orphanGrace)
	defer grace.Stop()
	graceOver, logged := false, false
	for {
		switch {
		case n == w.cfg.concurrency:
			return n, true
		case n > 0 && graceOver:
			w.log.Warn("handlers of a lost session are still running: the next session declares less concurrency",
				"concurrency", n, "orphans", w.cfg.concurrency-n)
			return n, true
		case n <= 0 && graceOver && !logged:
			w.log.Warn("worker waiting for a free slot before it reconnects",
				"orphans", w.cfg.concurrency-n)
			logged = true
		}
		select {
		case <-gone:
		case <-grace.C:
			graceOver = true
		case <-w.stopCh:
			return 0, false
		}
		n, gone = w.capacity()
	}
}
