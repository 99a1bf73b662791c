package conveyor

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

// awaitCapacity waits until the Worker may start at least one handler and
// returns how many: the concurrency the next Hello declares. It returns
// false if the Worker stops first.
func (w *Worker) awaitCapacity() (int, bool) {
	logged := false
	for {
		n, gone := w.capacity()
		if n > 0 {
			if n < w.cfg.concurrency {
				w.log.Warn("handlers of a lost session are still running: the next session declares less concurrency",
					"concurrency", n, "orphans", w.cfg.concurrency-n)
			}
			return n, true
		}
		if !logged {
			w.log.Warn("worker waiting for a free slot before it reconnects",
				"orphans", w.cfg.concurrency-n)
			logged = true
		}
		select {
		case <-gone:
		case <-w.stopCh:
			return 0, false
		}
	}
}
