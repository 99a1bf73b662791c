package bolt

import (
	"context"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/conveyor-dev/conveyor/broker"
	storagev1 "github.com/conveyor-dev/conveyor/gen/conveyor/storage/v1"
)

// Act applies an operator action to each task on its own; see
// broker.Broker. The actions are durable when Act returns.
//
// Terminal tasks are decided on their status in the file, read before the
// lock (see fileRead). An action on a task whose last change is not
// durable yet (it just finished, or another action on it is being
// committed), or that a Purge under way may delete, waits for that commit
// and decides again: a second action on one task gets the answer it would
// get after the first, and is never applied to a status the first one
// changed.
func (e *Engine) Act(ctx context.Context, p broker.ActParams) ([]broker.ActResult, error) {
	res := make([]broker.ActResult, len(p.IDs))
	keys := make([]key, len(p.IDs))
	valid := make([]key, 0, len(p.IDs))
	for i, id := range p.IDs {
		k, err := parseKey(id)
		if err != nil {
			res[i].Err = err
			continue
		}
		keys[i] = k
		valid = append(valid, k)
	}
	// Let every change decided so far reach the file first.
	if err := e.Sync(ctx); err != nil {
		return nil, err
	}
	now := p.Now.UnixNano()
	for {
		done, err := e.lockAndRead(ctx, nil, valid, nil)
		if err != nil {
			return nil, err
		}
		if b, again := e.actMustWaitLocked(valid, done); again {
			e.mu.Unlock()
			if b != nil {
				if err := e.commit.wait(ctx, b); err != nil {
					return nil, err
				}
			}
			continue
		}
		for i, id := range p.IDs {
			if res[i].Err != nil {
				continue
			}
			k := keys[i]
			if m, live := e.tasks.get(k); live {
				if p.From != broker.StateUnspecified && m.state != p.From {
					res[i].Err = movedOn(id, m.state, p.From)
					continue
				}
				res[i] = e.actLiveLocked(p.Action, k, m, now)
				continue
			}
			// A task settling now was changed by this call (an id given
			// twice, a dependent its earlier delete canceled): what was
			// read of it is no longer its state.
			s, settling := e.settling[k]
			switch st := done.done[k]; {
			case settling && s.state != 0 && !p.Action.Applies(s.state):
				res[i].Err = notApplicable(p.Action, k, s.state) // the answer after the first: an id given twice
			case settling && s.state != 0:
				res[i].Err = fmt.Errorf("task %s has just finished; try again: %w", id, broker.ErrInvalidState)
			case st != nil && !settling && p.From != broker.StateUnspecified && broker.State(st.State) != p.From:
				res[i].Err = movedOn(id, broker.State(st.State), p.From)
			case st != nil && !settling:
				res[i].Err = e.actDoneLocked(p.Action, k, st, now)
			default:
				res[i].Err = fmt.Errorf("task %s: %w", id, broker.ErrNotFound)
			}
		}
		break
	}
	b := e.commit.syncPointLocked()
	e.mu.Unlock()
	if b != nil {
		if err := e.commit.wait(ctx, b); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// movedOn is the refusal of an action on a task that left the state its
// caller found it in.
func movedOn(id string, now, from broker.State) error {
	return fmt.Errorf("task %s is %s now, no longer %s: %w", id, now, from, broker.ErrInvalidState)
}

// actMustWaitLocked reports whether Act cannot decide on what it read
// from the file yet, and the commit to wait for before it reads again
// (nil: read again at once).
func (e *Engine) actMustWaitLocked(keys []key, r *fileRead) (*batch, bool) {
	for _, k := range keys {
		if _, live := e.tasks.get(k); live {
			continue
		}
		if _, ok := e.settling[k]; ok {
			return e.commit.syncPointLocked(), true
		}
		if st := r.done[k]; st != nil && e.purgeMayTakeLocked(st) {
			return e.commit.syncPointLocked(), true
		}
	}
	return nil, false
}

func notApplicable(a broker.Action, k key, s broker.State) error {
	return fmt.Errorf("task %s is %s: it cannot be %s: %w", k, s, pastTense(a), broker.ErrInvalidState)
}

func pastTense(a broker.Action) string {
	switch a {
	case broker.ActionCancel:
		return "canceled"
	case broker.ActionDelete:
		return "deleted"
	case broker.ActionRun:
		return "run now"
	}
	return "archived"
}

// actLiveLocked applies an action to a live task.
func (e *Engine) actLiveLocked(a broker.Action, k key, m meta, now int64) broker.ActResult {
	if !a.Applies(m.state) {
		return broker.ActResult{Err: notApplicable(a, k, m.state)}
	}
	switch a {
	case broker.ActionCancel:
		if m.state == stateActive {
			m.flags |= flagCanceled
			e.tasks.put(k, m)
			e.commit.appendLocked(func(w *txw) error {
				return w.updateLive(k, func(st *storagev1.TaskStatus) { st.CancelRequested = true })
			}, nil)
			l := e.leases[k]
			if l == nil {
				return broker.ActResult{}
			}
			return broker.ActResult{Running: &broker.LapsedLease{SessionID: l.session, Lease: broker.LeaseRef{TaskID: k.String(), Token: l.token}}}
		}
		e.finishLocked(k, m, stateCanceled, now, nil)
	case broker.ActionRun:
		m.waiting, m.flags = 0, m.flags&^flagDepFailed
		e.toPendingLocked(k, m, now, func(st *storagev1.TaskStatus) {
			st.NextProcessAt = now
			forgetDependencies(st)
		})
	case broker.ActionArchive:
		e.finishLocked(k, m, stateArchived, now, func(st *storagev1.TaskStatus) { st.LastError = broker.ArchivedByOperator })
	case broker.ActionDelete:
		e.deleteLiveLocked(k, m, now)
	}
	return broker.ActResult{}
}

// deleteLiveLocked removes a live task that is not ACTIVE, in memory and
// in the file.
func (e *Engine) deleteLiveLocked(k key, m meta, now int64) {
	e.unreadyLocked(k, &m)
	q := e.queues[m.queue]
	q.counts[m.state]--
	e.forgetLocked(k)
	switch m.state {
	case stateAggr:
		e.leftGroupLocked(k)
		e.groupShrankLocked(q)
	case stateBlocked:
		e.leftBlockedLocked(k)
	}
	if q.refused {
		e.roomChangedLocked(q)
	}
	e.resolveDependentsLocked(k, stateCanceled, now)
	e.commit.appendLocked(func(w *txw) error {
		ls, err := w.loadLive(k)
		if err != nil {
			return err
		}
		ls.gone = true
		if err := w.reindex(k, &ls.st, ls.orig, 0); err != nil {
			return err
		}
		if err := w.live.Delete(k[:]); err != nil {
			return err
		}
		if err := w.dropDependents(k); err != nil {
			return err
		}
		return w.tasks.Delete(k[:])
	}, e.settleLocked(k, 0, now))
}

// settleLocked records that task k, which memory no longer holds live, has
// a change on its way to the file (it took state to; 0: it was deleted),
// and returns the post-commit hook that ends the record.
func (e *Engine) settleLocked(k key, to broker.State, now int64) func() {
	e.settling[k] = settled{n: e.settling[k].n + 1, state: to, at: now}
	return func() {
		if s := e.settling[k]; s.n <= 1 {
			delete(e.settling, k)
		} else {
			s.n--
			e.settling[k] = s
		}
	}
}

// forgetLocked drops a task that leaves memory from every side index
// (the caller has updated its counts and ready entry).
func (e *Engine) forgetLocked(k key) {
	e.dropKeyLocked(k)
	e.tasks.del(k)
	e.dropLeaseLocked(k)
	if _, ok := e.expires[k]; ok {
		delete(e.expires, k)
		e.tidyExpiriesLocked() // its entry is stale now
	}
	delete(e.retention, k)
	delete(e.ranPastExpiry, k)
	if uk, ok := e.uniqOf[k]; ok {
		delete(e.uniqOf, k)
		if c := e.unique[uk]; c.k == k {
			delete(e.unique, uk)
		}
	}
}

// actDoneLocked applies an action to a terminal task, whose durable
// status is st.
func (e *Engine) actDoneLocked(a broker.Action, k key, st *storagev1.TaskStatus, now int64) error {
	s := stateOf(st)
	if !a.Applies(s) {
		return notApplicable(a, k, s)
	}
	q := e.byName[st.GetQueue()]
	if q == nil {
		return fmt.Errorf("task %s names queue %q, which the engine does not know", k, st.GetQueue())
	}
	switch a {
	case broker.ActionRun:
		return e.reviveLocked(q, k, st, now)
	case broker.ActionDelete:
		q.counts[s]--
		e.commit.appendLocked(func(w *txw) error {
			if err := w.done.Delete(k[:]); err != nil {
				return err
			}
			if err := w.tasks.Delete(k[:]); err != nil {
				return err
			}
			w.termDelta(st.GetQueue(), s, -1)
			if err := w.dropDependents(k); err != nil {
				return err
			}
			return w.index.Delete(indexKey(st.GetQueue(), s, st.GetType(), k))
		}, e.settleLocked(k, 0, now))
	}
	return nil
}

// reviveLocked makes an ARCHIVED or CANCELED task PENDING again (RunTask):
// its retry count is kept, its expiry is dropped (the operator asked for
// it to run), its deadline still holds, and it takes its unique key back
// unless another task holds it now.
func (e *Engine) reviveLocked(q *queue, k key, st *storagev1.TaskStatus, now int64) error {
	if err := e.checkUniqueLocked(st.GetUniqueKey(), now); err != nil {
		return err
	}
	from := stateOf(st)
	q.counts[from]--
	q.counts[statePending]++
	m := meta{due: now, queue: q.index, retried: st.GetRetried(), maxRetry: st.GetMaxRetry(), state: statePending,
		prio: uint8(st.GetPriority()), flags: flagCommitted, kind: e.kindLocked(st.GetType(), st.GetAtMostOnce())}
	revived := proto.CloneOf(st)
	revived.State = int32(statePending)
	revived.CompletedAt, revived.PurgeAt, revived.ExpiresAt, revived.NextProcessAt = 0, 0, 0, now
	// A cancel of an earlier run is spent: left in the file, it would make
	// a restart while the revived task runs cancel it.
	revived.CancelRequested = false
	forgetDependencies(revived)
	if uk := st.GetUniqueKey(); uk != "" {
		e.unique[uk] = uniqueClaim{k: k, until: st.GetUniqueUntil(), since: now}
		e.uniqOf[k] = uk
	}
	if st.Retention != nil {
		e.retention[k] = st.GetRetention()
	}
	if ck := st.GetConcurrencyKey(); ck != "" {
		e.keyOf[k] = e.ckeyLocked(q, ck)
	}
	e.indexExpiryLocked(k, &m, revived.GetExpiresAt(), revived.GetDeadline())
	e.tasks.put(k, m)
	e.commit.appendLocked(func(w *txw) error {
		if err := w.done.Delete(k[:]); err != nil {
			return err
		}
		if err := w.live.Put(k[:], marshal(revived)); err != nil {
			return err
		}
		w.termDelta(st.GetQueue(), from, -1)
		return w.reindex(k, revived, from, statePending)
	}, nil)
	e.pushReadyLocked(k)
	return nil
}

// forgetDependencies clears what a task run now (RunTask) no longer waits
// for: the dependencies it had left, and whether one failed. Its last
// error, which may name the failure, stays as its history.
func forgetDependencies(st *storagev1.TaskStatus) {
	st.WaitingOn, st.DependencyFailed = nil, false
}

// doneLookup answers the terminal status of a task from what was read of
// the file before the lock (see fileRead).
type doneLookup struct{ file *fileRead }

func (l *doneLookup) status(k key) (*storagev1.TaskStatus, error) {
	st, ok := l.file.done[k]
	if !ok {
		return nil, fmt.Errorf("status of %s was not read from the file", k)
	}
	return st, nil
}
