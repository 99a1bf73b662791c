package sessions

import (
	"time"

	"github.com/conveyor-dev/conveyor/broker"
)

// inflight is the bookkeeping of one session's deliveries: which tasks the
// worker holds, which answers it still owes, and how many of its
// concurrency slots are taken. It is a plain data structure; the session
// guards it with its mutex.
//
// A delivery (one Dispatch, or one BatchDispatch) takes one slot from the
// moment it is sent until every member is answered. When the reaper takes
// a member's lease back, the worker still owes a Result for it (protocol
// §5.7: a canceled task is still answered), so the slot stays taken until
// that answer arrives or the reclaim window passes; the window bounds how
// long a worker that never answers can shrink its own capacity. A late
// answer after the window is dropped and never returns the slot twice.
//
// Matching an answer to its delivery: a Result that echoes an attempt_id
// names its delivery exactly. One without (an older worker) is matched by
// task id, in delivery order: while the session is owed answers for lapsed
// deliveries of the task, the oldest of them takes the Result (and drops
// it); only then does a Result apply to the task's live delivery. This is
// exact for a worker that answers each task id's deliveries in the order
// it received them, as the protocol's one Result per Dispatch implies;
// docs/protocol.md says what stays ambiguous for a worker that does not.
type inflight struct {
	slots int   // deliveries holding a slot
	bytes int64 // envelope bytes of the deliveries holding a slot

	byAttempt map[string]*member   // attempt id → member, until answered or forgotten
	live      map[string]*member   // task id → its live (unlapsed, unanswered) member
	owed      map[string][]*member // task id → lapsed members owed an answer, oldest first
	reclaims  []*delivery          // lapsed deliveries holding a slot, by reclaim time
}

// delivery is one Dispatch or BatchDispatch.
type delivery struct {
	members []*member
	batch   bool
	bytes   int64
	open    int  // members not answered yet
	lapsed  int  // members that lapsed and are not answered yet
	slot    bool // the delivery still holds a slot
	// reclaimAt is when a delivery whose open members have all lapsed
	// gives its slot back even without their answers.
	reclaimAt time.Time
}

// member is one task of a delivery.
type member struct {
	d         *delivery
	taskID    string
	attemptID string
	token     uint64
	lapsed    bool
	answered  bool
	start     startState
	lapsedAt  time.Time
	// queue, typ and sentAt label the attempt's metrics.
	queue, typ string
	sentAt     time.Time
	// retried, maxRetry and policy are what the decision a Result leads to
	// needs to know of the attempt.
	retried, maxRetry int32
	policy            *broker.RetryPolicy
}

func newInflight() *inflight {
	return &inflight{
		byAttempt: map[string]*member{},
		live:      map[string]*member{},
		owed:      map[string][]*member{},
	}
}

// add records a delivery just sent: it takes a slot.
func (f *inflight) add(d *delivery) {
	d.open = len(d.members)
	d.slot = true
	f.slots++
	f.bytes += d.bytes
	for _, m := range d.members {
		m.d = d
		f.byAttempt[m.attemptID] = m
		f.live[m.taskID] = m
	}
}

// answer matches a Result to the member it answers (see inflight), marks
// it answered and frees its delivery's slot once every member is. When it
// answers a batch's last live member while lapsed ones are still owed, the
// reclaim window of the delivery starts at now, as it would have had that
// member lapsed too. It returns nil for a Result the session is owed by no
// delivery (an unknown id, a repeated answer, an attempt id of another
// task).
func (f *inflight) answer(taskID, attemptID string, now time.Time, window time.Duration) *member {
	var m *member
	switch {
	case attemptID != "":
		m = f.byAttempt[attemptID]
		if m != nil && m.taskID != taskID {
			m = nil
		}
	case len(f.owed[taskID]) > 0:
		m = f.owed[taskID][0]
	default:
		m = f.live[taskID]
	}
	if m == nil || m.answered {
		return nil
	}
	m.answered = true
	delete(f.byAttempt, m.attemptID)
	d := m.d
	d.open--
	if m.lapsed {
		d.lapsed--
		f.dropOwed(m)
	} else if f.live[taskID] == m {
		delete(f.live, taskID)
	}
	switch {
	case d.open == 0:
		f.freeSlot(d)
	case !m.lapsed && d.slot && d.lapsed == d.open:
		d.reclaimAt = now.Add(window)
		f.reclaims = append(f.reclaims, d)
	}
	return m
}

// nextReclaim is when the oldest lapsed delivery holding a slot is due to
// give it back (zero: none is).
func (f *inflight) nextReclaim() time.Time {
	if len(f.reclaims) == 0 {
		return time.Time{}
	}
	return f.reclaims[0].reclaimAt
}

// unanswered returns d's members that are still unanswered, live or
// lapsed (a BatchResult that left them out answers for them).
func (d *delivery) unanswered() []*member {
	var out []*member
	for _, m := range d.members {
		if !m.answered {
			out = append(out, m)
		}
	}
	return out
}

// lapse records that the reaper took back the lease (taskID, token). It
// returns false when the session does not hold that lease live. The slot
// stays taken; once every open member of the delivery has lapsed (or been
// answered), it is given back at now + window unless the answers come
// first.
func (f *inflight) lapse(taskID string, token uint64, now time.Time, window time.Duration) bool {
	m := f.live[taskID]
	if m == nil || m.token != token {
		return false
	}
	delete(f.live, taskID)
	m.lapsed = true
	m.lapsedAt = now
	f.owed[taskID] = append(f.owed[taskID], m)
	d := m.d
	d.lapsed++
	if d.slot && d.lapsed == d.open {
		d.reclaimAt = now.Add(window)
		f.reclaims = append(f.reclaims, d)
	}
	return true
}

// reclaim gives back the slots of lapsed deliveries whose window passed by
// now, forgets lapsed members older than forgetAfter whose task the session
// does not hold again, and returns when it is next due (zero: nothing waits).
func (f *inflight) reclaim(now time.Time, forgetAfter time.Duration) time.Time {
	for len(f.reclaims) > 0 {
		d := f.reclaims[0]
		if d.slot && d.lapsed == d.open && d.reclaimAt.After(now) {
			break
		}
		f.reclaims = f.reclaims[1:]
		if d.slot && d.lapsed == d.open {
			f.freeSlot(d)
		}
	}
	if len(f.reclaims) == 0 {
		f.reclaims = nil // let the backing array go
	}
	for id, list := range f.owed {
		if f.live[id] != nil {
			continue // never forget an owed answer while the task is held again
		}
		for len(list) > 0 && now.Sub(list[0].lapsedAt) > forgetAfter && !list[0].d.slot {
			delete(f.byAttempt, list[0].attemptID)
			list = list[1:]
		}
		if len(list) == 0 {
			delete(f.owed, id)
		} else {
			f.owed[id] = list
		}
	}
	if len(f.reclaims) > 0 {
		return f.reclaims[0].reclaimAt
	}
	return time.Time{}
}

func (f *inflight) dropOwed(m *member) {
	list := f.owed[m.taskID]
	for i, x := range list {
		if x == m {
			list = append(list[:i:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(f.owed, m.taskID)
	} else {
		f.owed[m.taskID] = list
	}
}

func (f *inflight) freeSlot(d *delivery) {
	if !d.slot {
		return
	}
	d.slot = false
	f.slots--
	f.bytes -= d.bytes
}

// held returns the live members named by a Heartbeat, each once. An
// attempt id names its delivery exactly; a task id extends the task's live
// delivery unless the frame names one of that task's deliveries by attempt
// id, which then fences it (a worker still running a lapsed attempt lists
// that attempt, and must not keep the redelivery's lease alive by the task
// id it shares). A worker that echoes attempt ids for some tasks only keeps
// the others alive by their task ids.
func (f *inflight) held(taskIDs, attemptIDs []string) []*member {
	var out []*member
	seen := make(map[*member]struct{}, len(taskIDs)+len(attemptIDs))
	pick := func(m *member) {
		if m == nil || m.lapsed || m.answered {
			return
		}
		if _, dup := seen[m]; dup {
			return
		}
		seen[m] = struct{}{}
		out = append(out, m)
	}
	var fenced map[string]struct{}
	if len(attemptIDs) > 0 {
		fenced = make(map[string]struct{}, len(attemptIDs))
	}
	for _, a := range attemptIDs {
		if m := f.byAttempt[a]; m != nil {
			fenced[m.taskID] = struct{}{}
			pick(m)
		}
	}
	for _, id := range taskIDs {
		if _, ok := fenced[id]; !ok {
			pick(f.live[id])
		}
	}
	return out
}

// takeLive removes and returns every live member (the session is ending:
// their leases are released).
func (f *inflight) takeLive() []*member {
	out := make([]*member, 0, len(f.live))
	for id, m := range f.live {
		out = append(out, m)
		m.answered = true
		delete(f.live, id)
	}
	return out
}

// taskIDs lists the tasks the session holds live, for ListWorkers.
func (f *inflight) taskIDs() []string {
	out := make([]string, 0, len(f.live))
	for id := range f.live {
		out = append(out, id)
	}
	return out
}

func (m *member) ref() broker.LeaseRef { return broker.LeaseRef{TaskID: m.taskID, Token: m.token} }
