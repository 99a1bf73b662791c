package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/oklog/ulid/v2"

	"github.com/conveyor-dev/conveyor/broker"
)

// newItem is one task of an enqueue call on its way into the database.
type newItem struct {
	nt    *broker.NewTask
	id    string
	state broker.State
	// due is next_process_at; expire the earlier of the expiry and the
	// deadline (0: none).
	due, expire int64
	deps        depStart
	// release is the state a BLOCKED task takes once done waiting.
	release broker.State
	// lastError is set on a task that starts CANCELED or BLOCKED for good
	// because of a dependency that failed.
	lastError string
	specBytes int
	metadata  []byte
	// stored is set once the row is in; existed when the id named a task
	// already (or an earlier item's); err is the item's failure.
	stored, existed bool
	dupOf           int // the earlier item of the call with this id, + 1
	err             error
}

// prepare checks and encodes the tasks of a call.
func (e *Engine) prepare(tasks []broker.NewTask, now int64) []newItem {
	items := make([]newItem, len(tasks))
	for i := range tasks {
		it := &items[i]
		nt := &tasks[i]
		it.nt = nt
		if err := checkNewTask(nt); err != nil {
			it.err = err
			continue
		}
		if err := storable(nt.Type, nt.ContentType, nt.UniqueKey, nt.Group, nt.ConcurrencyKey, nt.Metadata); err != nil {
			it.err = err
			continue
		}
		if nt.ID == "" {
			it.id = e.ids.next(fromNanos(now))
		} else if _, err := ulid.ParseStrict(nt.ID); err != nil {
			it.err = fmt.Errorf("task_id %q is not a ULID", nt.ID)
			continue
		} else {
			it.id = nt.ID
		}
		it.state = nt.State
		it.due = now
		if it.state == broker.StateScheduled || it.state == broker.StateBlocked && nanos(nt.ProcessAt) > now {
			it.due = nanos(nt.ProcessAt)
		}
		it.expire = expireOf(nanos(nt.ExpiresAt), nanos(nt.Deadline))
		if len(nt.Metadata) > 0 {
			it.metadata, _ = json.Marshal(nt.Metadata) // a map of strings always encodes
		}
		it.specBytes = len(nt.Payload) + len(nt.Type) + len(nt.ContentType) + len(nt.Options) + len(it.metadata)
		if it.state == broker.StateBlocked {
			it.release = releaseState(nt.Group != "", it.due, now)
		}
	}
	return items
}

// checkNewTask refuses what the caller must have resolved: an initial
// state the engine does not start tasks in, a priority off the scale.
func checkNewTask(nt *broker.NewTask) error {
	switch nt.State {
	case broker.StatePending, broker.StateScheduled, broker.StateAggregating, broker.StateBlocked:
	default:
		return fmt.Errorf("a new task cannot start %s", nt.State)
	}
	if len(nt.DependsOn) > 0 && nt.State != broker.StateBlocked {
		return fmt.Errorf("a new task with dependencies starts %s, not %s", broker.StateBlocked, nt.State)
	}
	if nt.Priority < 1 || nt.Priority > 9 {
		return fmt.Errorf("priority %d is not 1..9", nt.Priority)
	}
	if nt.Queue == "" {
		return errors.New("a new task needs a queue")
	}
	if nt.AtMostOnce && nt.Group != "" {
		// A fired group is leased whole, with no route to pass it over.
		return errors.New("an at-most-once task cannot join a group")
	}
	return nil
}

// expireOf is the earlier of an expiry and a deadline (0: none), as
// broker.ExpiryOf.
func expireOf(expires, deadline int64) int64 {
	at, _ := broker.ExpiryOf(fromNanos(expires), fromNanos(deadline))
	return nanos(at)
}

// releaseState is the state a BLOCKED task takes once its dependencies
// are done: AGGREGATING when it has a group (it joins it then), SCHEDULED
// when it has a process time after its enqueue (PENDING if that time has
// passed by its release), else PENDING.
func releaseState(grouped bool, due, enqueuedAt int64) broker.State {
	switch {
	case grouped:
		return broker.StateAggregating
	case due > enqueuedAt:
		return broker.StateScheduled
	}
	return broker.StatePending
}

// Enqueue stores each task independently; see broker.Broker.
func (e *Engine) Enqueue(ctx context.Context, p broker.EnqueueParams) ([]broker.EnqueueResult, error) {
	now := nanos(p.Now)
	var items []newItem
	err := e.enqueueParked(ctx, p, func(t *txn) error {
		items = e.prepare(p.Tasks, now)
		return t.insertItems(ctx, items, now, false)
	})
	if err != nil {
		return nil, err
	}
	res := make([]broker.EnqueueResult, len(items))
	for i := range items {
		it := &items[i]
		switch {
		case it.err != nil:
			res[i].Err = it.err
		case it.existed:
			res[i].Err = fmt.Errorf("task %s: %w", it.id, broker.ErrAlreadyExists)
		default:
			res[i].Task = it.view(now)
		}
	}
	return res, nil
}

// EnqueueTx stores all tasks or none; see broker.Broker.
func (e *Engine) EnqueueTx(ctx context.Context, p broker.EnqueueParams) ([]*broker.Task, error) {
	now := nanos(p.Now)
	var out []*broker.Task
	err := e.enqueueParked(ctx, p, func(t *txn) error {
		items := e.prepare(p.Tasks, now)
		for i := range items {
			if items[i].err != nil {
				return fmt.Errorf("items[%d]: %w", i, items[i].err)
			}
		}
		if err := t.insertItems(ctx, items, now, true); err != nil {
			return err
		}
		out = make([]*broker.Task, len(items))
		for i := range items {
			it := &items[i]
			switch {
			case it.err != nil:
				return fmt.Errorf("items[%d]: %w", i, it.err)
			case it.dupOf > 0:
				prev := *out[it.dupOf-1]
				prev.Existed = true
				out[i] = &prev
			case it.existed:
				task, err := t.e.getTask(ctx, t.tx, it.id)
				if err != nil {
					return err
				}
				task.Existed = true
				out[i] = task
			default:
				out[i] = it.view(now)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// insertItems stores the prepared items that pass their checks, each on
// its own (a failed item leaves its err set and nothing of it stored). In
// a transaction of all or nothing (tx), a unique key held elsewhere fails
// the call at once, and an item whose id names a stored task is left as
// it is (existed), with no other check.
func (t *txn) insertItems(ctx context.Context, items []newItem, now int64, tx bool) error {
	if err := t.resolveNewDeps(ctx, items, now); err != nil {
		return err
	}
	if err := t.insertRows(ctx, items, now); err != nil {
		return err
	}
	for i := range items {
		it := &items[i]
		if !it.stored || it.nt.UniqueKey == "" || it.state.Terminal() {
			continue
		}
		holder, err := t.claimUnique(ctx, it.nt.UniqueKey, it.id, nanos(it.nt.UniqueUntil), now)
		if err != nil {
			return err
		}
		if holder == "" {
			continue
		}
		held := fmt.Errorf("unique_key %q is held by task %s: %w", it.nt.UniqueKey, holder, broker.ErrAlreadyExists)
		if tx {
			return held
		}
		it.err = held
		if _, err := t.exec(ctx, `DELETE FROM conveyor_tasks WHERE id = $1`, it.id); err != nil {
			return err
		}
		it.stored = false
	}
	if err := t.admitNew(ctx, items, tx); err != nil {
		return err
	}
	t.ensureQueues(items)
	for i := range items {
		if it := &items[i]; it.stored {
			if err := t.startItem(ctx, it, now); err != nil {
				return err
			}
		}
	}
	return nil
}

// insertRows inserts the items still without an error; an item whose id
// is taken (by a stored task, or an earlier item of the call) is marked
// existed instead. When the engine chose every id (none can be taken),
// the rows go in unchecked: up to copyAbove in an INSERT that goes out
// with the transaction's next statement or its COMMIT, more with COPY,
// PostgreSQL's fastest way in; otherwise in one INSERT that skips the
// taken ids.
func (t *txn) insertRows(ctx context.Context, items []newItem, now int64) error {
	idx, fresh := newRows(items)
	switch {
	case len(idx) == 0:
		return nil
	case fresh && len(idx) > copyAbove:
		return t.copyRows(ctx, items, idx, now)
	case fresh:
		t.tx.sendAhead(insertTasksSQL, newRowArgs(items, idx, now)...)
		for _, i := range idx {
			items[i].stored = true
		}
		return nil
	}
	return t.insertRowsChecked(ctx, items, idx, now)
}

// copyAbove is the most fresh rows an enqueue inserts with an INSERT
// queued ahead rather than with COPY. A COPY costs the transaction three
// round trips of its own (BEGIN, which cannot share its write, then the
// COPY's start and its data), a small enqueue's whole time on a loaded
// machine, while its rows cost the database less than the INSERT's. W4's
// enqueues (about six tasks) and W1's (1,000) were measured on either
// side of it; where the two cross was not measured.
const copyAbove = 32

// newRows returns the items to insert, each id once, marking a later item
// with an earlier one's id; fresh says the engine chose every id.
func newRows(items []newItem) (idx []int, fresh bool) {
	fresh = true
	seen := map[string]int{}
	for i := range items {
		it := &items[i]
		if it.err != nil {
			continue
		}
		if j, dup := seen[it.id]; dup {
			it.existed, it.dupOf = true, j+1
			continue
		}
		seen[it.id] = i
		idx = append(idx, i)
		fresh = fresh && it.nt.ID == ""
	}
	return idx, fresh
}

// insertRowsChecked inserts items[idx] in one statement, skipping the ids
// already stored.
func (t *txn) insertRowsChecked(ctx context.Context, items []newItem, idx []int, now int64) error {
	rows, err := t.query(ctx, insertTasksSQL+` ON CONFLICT (id) DO NOTHING RETURNING id`, newRowArgs(items, idx, now)...)
	if err != nil {
		return err
	}
	inserted := map[string]bool{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return err
		}
		inserted[id] = true
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for _, i := range idx {
		if it := &items[i]; inserted[it.id] {
			it.stored = true
		} else {
			it.existed = true
		}
	}
	return nil
}

// insertTasksSQL inserts new tasks, one row per element of its arrays
// (newRowArgs), in order: a ready one draws its ready_seq as it goes in.
const insertTasksSQL = `
	INSERT INTO conveyor_tasks (id, queue, type, state, priority, retried, max_retry, payload, content_type, metadata,
		options, enqueued_at, due_at, expires_at, deadline, expire_at, timeout, retention, retry_strategy, retry_base,
		retry_max, unique_key, unique_until, group_key, concurrency_key, ready_seq, completed_at, last_error,
		spec_bytes, release_state, waiting, dep_failed, at_most_once)
	SELECT u.id, u.queue, u.type, u.state, u.prio, u.retried, u.max_retry, u.payload, u.ctype, u.meta::jsonb,
		u.opts, $1, u.due, u.expires, u.deadline, nullif(u.expire_at, 0), u.timeout, u.retention, u.rstrat, u.rbase,
		u.rmax, u.uniq, u.uniq_until, u.grp, u.ckey,
		CASE WHEN u.state = 2 THEN nextval('conveyor_ready_seq') ELSE 0 END, coalesce(u.completed, 0), u.last_error,
		u.spec_bytes, u.release, u.waiting, u.dep_failed, u.at_most_once
	FROM unnest($2::text[], $3::text[], $4::text[], $5::int2[], $6::int2[], $7::int4[], $8::int4[], $9::bytea[],
		$10::text[], $11::text[], $12::bytea[], $13::int8[], $14::int8[], $15::int8[], $16::int8[], $17::int8[],
		$18::int8[], $19::int2[], $20::int8[], $21::int8[], $22::text[], $23::int8[], $24::text[], $25::text[],
		$26::int8[], $27::text[], $28::int4[], $29::int2[], $30::int4[], $31::bool[], $32::bool[])
		WITH ORDINALITY AS u(id, queue, type, state, prio, retried, max_retry, payload, ctype, meta, opts, due, expires,
			deadline, expire_at, timeout, retention, rstrat, rbase, rmax, uniq, uniq_until, grp, ckey, completed,
			last_error, spec_bytes, release, waiting, dep_failed, at_most_once, ord)
	ORDER BY u.ord`

// newRowArgs are insertTasksSQL's arguments for items[idx].
func newRowArgs(items []newItem, idx []int, now int64) []any {
	var (
		ids, queues, types, ctypes                                []string
		uniques, groups, ckeys, metas                             []*string
		states, prios, rstrats                                    []*int16
		retries, maxRetries                                       []int32
		payloads, options                                         [][]byte
		dues, expires, deadlines, expireAts, timeouts, uniqUntils []int64
		retentions, rbases, rmaxes, endedAts                      []*int64
		lastErrs                                                  []string
		specBytes                                                 []int32
		releases                                                  []int16
		waitings                                                  []int32
		depFailed, atMostOnce                                     []bool
	)
	for _, i := range idx {
		it := &items[i]
		nt := it.nt
		ids, queues, types, ctypes = append(ids, it.id), append(queues, nt.Queue), append(types, nt.Type), append(ctypes, nt.ContentType)
		uniques, groups, ckeys = append(uniques, nullString(nt.UniqueKey)), append(groups, nullString(nt.Group)), append(ckeys, nullString(nt.ConcurrencyKey))
		var meta *string
		if it.metadata != nil {
			s := string(it.metadata)
			meta = &s
		}
		metas = append(metas, meta)
		st := int16(it.state)
		states, prios = append(states, &st), append(prios, ptr(int16(nt.Priority)))
		retries, maxRetries = append(retries, 0), append(maxRetries, nt.MaxRetry)
		payloads, options = append(payloads, nonNil(nt.Payload)), append(options, nt.Options)
		dues, expires, deadlines = append(dues, it.due), append(expires, nanos(nt.ExpiresAt)), append(deadlines, nanos(nt.Deadline))
		expireAts, timeouts, uniqUntils = append(expireAts, it.expire), append(timeouts, int64(nt.Timeout)), append(uniqUntils, nanos(nt.UniqueUntil))
		ret, rs, rb, rm := retryColumns(nt)
		retentions, rstrats, rbases, rmaxes = append(retentions, ret), append(rstrats, rs), append(rbases, rb), append(rmaxes, rm)
		endedAts, lastErrs = append(endedAts, it.endedAt(now)), append(lastErrs, it.lastError)
		specBytes, releases = append(specBytes, int32(it.specBytes)), append(releases, int16(it.release))
		waitings, depFailed = append(waitings, int32(len(it.deps.waitingOn))), append(depFailed, it.deps.failed != "")
		atMostOnce = append(atMostOnce, nt.AtMostOnce)
	}
	return []any{now, ids, queues, types, states, prios, retries, maxRetries, payloads, ctypes, metas, options, dues,
		expires, deadlines, expireAts, timeouts, retentions, rstrats, rbases, rmaxes, uniques, uniqUntils, groups, ckeys,
		endedAts, lastErrs, specBytes, releases, waitings, depFailed, atMostOnce}
}

// ensureQueues records the queues of the stored items (a queue exists
// from its first task on) and counts their enqueues.
func (t *txn) ensureQueues(items []newItem) {
	var names []string
	for i := range items {
		if it := &items[i]; it.stored {
			t.q(it.nt.Queue).enqueued++
			if !slices.Contains(names, it.nt.Queue) {
				names = append(names, it.nt.Queue)
			}
		}
	}
	t.createQueues(names)
}

// createQueues inserts the rows of the named queues that have none, with
// the transaction's next statement (nothing reads what it returns).
func (t *txn) createQueues(names []string) {
	if len(names) == 0 {
		return
	}
	slices.Sort(names)
	t.tx.sendAhead(createQueuesSQL, names)
}

// createQueuesSQL inserts the rows of the queues named in $1 that have
// none.
const createQueuesSQL = `INSERT INTO conveyor_queues (name) SELECT unnest($1::text[]) ON CONFLICT DO NOTHING`

// startItem applies what a stored task starts with, beyond its row: its
// place among the counts, its key's admission, its group, its
// dependencies' edges, its timers.
func (t *txn) startItem(ctx context.Context, it *newItem, now int64) error {
	q := it.nt.Queue
	switch it.state {
	case broker.StatePending:
		ready, err := t.admit(ctx, q, it.nt.ConcurrencyKey, it.id)
		if err != nil {
			return err
		}
		t.moved(q, 0, broker.StatePending, false, ready)
	case broker.StateScheduled:
		t.moved(q, 0, it.state, false, false)
		t.promoteTimer(it.due)
	case broker.StateAggregating:
		t.moved(q, 0, it.state, false, false)
		if err := t.joinGroup(ctx, it.id, q, it.nt.Group, it.nt.Type, it.specBytes, now); err != nil {
			return err
		}
	case broker.StateCanceled:
		t.moved(q, 0, it.state, false, false)
		t.endedTask(it.state, now, nil)
	default:
		t.moved(q, 0, it.state, false, false)
	}
	if it.expire != 0 && it.state.Waiting() {
		t.promoteTimer(it.expire)
	}
	return t.linkDeps(ctx, it)
}

// view is the task an enqueue returns for an item it stored.
func (it *newItem) view(now int64) *broker.Task {
	nt := it.nt
	t := &broker.Task{
		ID: it.id, Queue: nt.Queue, Type: nt.Type, Payload: nt.Payload, ContentType: nt.ContentType,
		Metadata: nt.Metadata, Options: nt.Options, State: it.state, Priority: nt.Priority, MaxRetry: nt.MaxRetry,
		EnqueuedAt: fromNanos(now), NextProcessAt: fromNanos(it.due), ExpiresAt: nt.ExpiresAt, Deadline: nt.Deadline,
		Timeout: nt.Timeout, RetryPolicy: nt.RetryPolicy, Retention: nt.Retention, UniqueKey: nt.UniqueKey,
		Group: nt.Group, ConcurrencyKey: nt.ConcurrencyKey, AtMostOnce: nt.AtMostOnce, LastError: it.lastError,
	}
	if it.state.Terminal() {
		t.CompletedAt = fromNanos(now)
	}
	if len(nt.DependsOn) > 0 {
		t.DependsOn = make([]broker.Dependency, len(nt.DependsOn))
		for i, d := range nt.DependsOn {
			d.State = it.deps.states[i]
			t.DependsOn[i] = d
		}
	}
	return t
}

func nullString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func ptr[T any](v T) *T { return &v }

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}
