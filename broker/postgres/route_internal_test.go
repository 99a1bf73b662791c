package postgres

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/conveyor-dev/conveyor/broker"
	bt "github.com/conveyor-dev/conveyor/broker/brokertest"
	"github.com/conveyor-dev/conveyor/internal/pgtest"
	"github.com/conveyor-dev/conveyor/internal/testwait"
)

// routeCases are routes of every walk kind (route.go).
func routeCases() []broker.Route {
	many := []string{"a", "t1", "t2", "t3", "t4", "t5", "t6", "t7", "t8"} // past maxTypeBranches
	return []broker.Route{
		{StartAuthorization: true},
		{},
		{Types: []string{"a"}},
		{Types: []string{"a", "c", "a"}},
		{Types: []string{"a"}, StartAuthorization: true},
		{Types: []string{"a", "b"}, Except: []string{"b"}},
		{Types: []string{"b"}, Except: []string{"b"}},
		{Types: []string{}},
		{Except: []string{"a"}},
		{Except: []string{"a", "c"}, StartAuthorization: true},
		{Types: many},
		{Types: many, StartAuthorization: true, Except: []string{"t1"}},
	}
}

// kindsOf are the kinds the route tests enqueue.
var kindsOf = []broker.Kind{{Type: "a"}, {Type: "a", AtMostOnce: true}, {Type: "b"}, {Type: "b", AtMostOnce: true},
	{Type: "c"}, {Type: "c", AtMostOnce: true}}

// TestWalkTakesAsRoute: the walk a route becomes takes what broker.Route
// says it takes, and is of the kind its shape calls for.
func TestWalkTakesAsRoute(t *testing.T) {
	t.Parallel()
	for _, r := range routeCases() {
		w := walkOf(r)
		for _, k := range append(kindsOf, broker.Kind{Type: "t5"}, broker.Kind{Type: "t1", AtMostOnce: true}) {
			if got, want := w.takes(k.Type, k.AtMostOnce), r.Takes(k.Type, k.AtMostOnce); got != want {
				t.Errorf("route %+v, kind %+v: the walk takes it %v, Route.Takes %v", r, k, got, want)
			}
		}
	}
	for _, c := range []struct {
		r    broker.Route
		kind walkKind
	}{
		{broker.Route{StartAuthorization: true}, walkOpen},
		{broker.Route{}, walkPlain},
		{broker.Route{Types: []string{"a"}}, walkTyped},
		{broker.Route{Types: []string{}}, walkNone},
		{broker.Route{Types: []string{"a"}, Except: []string{"a"}}, walkNone},
		{broker.Route{Except: []string{"a"}}, walkFiltered},
		{routeCases()[10], walkFiltered},
	} {
		if got := walkOf(c.r).kind; got != c.kind {
			t.Errorf("route %+v walks as %d, want %d", c.r, got, c.kind)
		}
	}
}

// openRouteEngine opens an engine of its own for a test.
func openRouteEngine(t *testing.T, note broker.Notifier) (*Engine, string) {
	t.Helper()
	schema := pgtest.Schema(t, t.Name())
	if note == nil {
		note = broker.NopNotifier{}
	}
	e, err := Open(t.Context(), Config{URL: pgtest.URL(t), Schema: schema, Notifier: note, MaxConns: 4})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return e, schema
}

// enqueueKinds enqueues one task of each kind into queue, and returns
// their ids by kind.
func enqueueKinds(t *testing.T, e *Engine, queue string, kinds []broker.Kind) map[string]broker.Kind {
	t.Helper()
	now := time.Now()
	var tasks []broker.NewTask
	for _, k := range kinds {
		nt := bt.NewTask(queue)
		nt.Type, nt.AtMostOnce = k.Type, k.AtMostOnce
		tasks = append(tasks, nt)
	}
	res, err := e.Enqueue(t.Context(), broker.EnqueueParams{Now: now, Tasks: bt.WithStates(tasks, now)})
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]broker.Kind{}
	for i, r := range res {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		ids[r.Task.ID] = kinds[i]
	}
	return ids
}

func routedLease(t *testing.T, e *Engine, session, queue string, n int, r broker.Route) []broker.Lease {
	t.Helper()
	ls, err := e.Lease(t.Context(), broker.LeaseParams{SessionID: session, Now: time.Now(), TTL: time.Hour,
		Picks: []broker.QueuePick{{Queue: queue, N: n}}, Route: r})
	if err != nil {
		t.Fatalf("Lease routed %+v: %v", r, err)
	}
	return ls
}

// TestRouteWalksTakeWhatRouteTakes: each walk's SQL, run on a queue
// holding every kind, leases exactly the kinds broker.Route.Takes allows,
// and says whether each is at most once.
func TestRouteWalksTakeWhatRouteTakes(t *testing.T) {
	t.Parallel()
	e, _ := openRouteEngine(t, nil)
	for i, r := range routeCases() {
		queue := fmt.Sprint("q", i)
		ids := enqueueKinds(t, e, queue, kindsOf)
		var got []broker.Kind
		for _, l := range routedLease(t, e, "s", queue, 100, r) {
			k := ids[l.Task.ID]
			if l.Task.AtMostOnce != k.AtMostOnce {
				t.Errorf("route %+v: leased task of kind %+v says AtMostOnce %v", r, k, l.Task.AtMostOnce)
			}
			got = append(got, k)
		}
		var want []broker.Kind
		for _, k := range kindsOf {
			if r.Takes(k.Type, k.AtMostOnce) {
				want = append(want, k)
			}
		}
		if !sameKinds(got, want) {
			t.Errorf("route %+v leased %v, want %v", r, got, want)
		}
	}
}

func sameKinds(a, b []broker.Kind) bool {
	key := func(k broker.Kind) string { return fmt.Sprint(k.Type, k.AtMostOnce) }
	ka, kb := make([]string, len(a)), make([]string, len(b))
	for i, k := range a {
		ka[i] = key(k)
	}
	for i, k := range b {
		kb[i] = key(k)
	}
	slices.Sort(ka)
	slices.Sort(kb)
	return slices.Equal(ka, kb)
}

// TestRoutedLeasePlans: on a table holding many tasks of other queues and
// types, and a long history, each walk reads the index made for it: the
// open walk the ready line as before routing, the zero route's the line
// without the at-most-once tasks, a typed walk the line by type, one
// branch per type and at-most-once-ness, with statistics or none yet.
func TestRoutedLeasePlans(t *testing.T) {
	t.Parallel()
	e, _ := openRouteEngine(t, nil)
	ctx := t.Context()
	if _, err := e.pool.Exec(ctx, `INSERT INTO conveyor_tasks (id, queue, type, state, priority, max_retry, payload, content_type,
			enqueued_at, at_most_once)
		SELECT 'x' || g, 'q' || (g % 5), 't' || (g % 20), CASE WHEN g % 10 = 0 THEN 2 ELSE 5 END, 4, 3, '', 'x', g, g % 7 = 0
		FROM generate_series(1, 50000) g`); err != nil {
		t.Fatal(err)
	}
	typed := []broker.Route{{Types: []string{"t1", "t3"}}, {Types: []string{"t1"}, StartAuthorization: true}}
	for _, r := range typed {
		requirePlan(t, e, r, "conveyor_tasks_ready_type", "without statistics")
	}
	if _, err := e.pool.Exec(ctx, `ANALYZE conveyor_tasks`); err != nil {
		t.Fatal(err)
	}
	requirePlan(t, e, broker.Route{StartAuthorization: true}, "conveyor_tasks_ready ", "")
	requirePlan(t, e, broker.Route{}, "conveyor_tasks_ready_plain", "")
	for _, r := range typed {
		requirePlan(t, e, r, "conveyor_tasks_ready_type", "")
	}
	plan := explain(t, e, waitingKindsSQL, "q1", broker.MaxWaitingKinds)
	if strings.Contains(plan, "Seq Scan") || !strings.Contains(plan, "Index Only Scan using conveyor_tasks_ready_type") {
		t.Errorf("WaitingKinds: want a skip along conveyor_tasks_ready_type, the plan is\n%s", plan)
	}
}

// requirePlan fails t unless the lease routed by r reads index, and a
// typed one that index only, one branch per type and at-most-once-ness,
// in the generic plan the engine's lease transactions take (with sorts
// off, leaseQueue).
func requirePlan(t *testing.T, e *Engine, r broker.Route, index, when string) {
	t.Helper()
	w := walkOf(r)
	sql, args := w.pick(&scanFloors{})
	leaseArgs := append([]any{"q1", 10, []int64{1}, []string{"s"}, []int64{2}, int64(0), "n"}, args...)
	leaseArgs = append(leaseArgs, false)
	plan := explainGeneric(t, e, leaseSQL(sql, len(leaseArgs)), leaseArgs...)
	if strings.Contains(plan, "Seq Scan") || !strings.Contains(plan, "Index Scan using "+index) {
		t.Errorf("route %+v %s: want an index scan of %s, the plan is\n%s", r, when, index, plan)
	}
	if w.kind != walkTyped {
		return
	}
	// A branch the planner expects few rows of may read its part of the
	// index by bitmap, and sort it.
	branches := len(w.types)
	if w.atMostOnce {
		branches *= 2
	}
	if strings.Count(plan, index) != branches || strings.Count(plan, "Index Scan") != branches {
		t.Errorf("route %+v %s: want one branch per type and at-most-once-ness, each of %s, the plan is\n%s", r, when, index, plan)
	}
}

// explainGeneric returns the generic plan of sql, as a lease's
// transaction plans it (plan.go: sorts off, generic plans forced), for
// args.
func explainGeneric(t *testing.T, e *Engine, sql string, args ...any) string {
	t.Helper()
	ctx := t.Context()
	conn, err := e.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, "SET LOCAL "+planSort+" = off; SET LOCAL plan_cache_mode = force_generic_plan"); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Prepare(ctx, "explained", sql); err != nil {
		t.Fatalf("PREPARE %s: %v", sql, err)
	}
	defer func() { _ = conn.Conn().Deallocate(context.WithoutCancel(ctx), "explained") }()
	lits := make([]string, len(args))
	for i, a := range args {
		lits[i] = sqlLiteral(a)
	}
	rows, err := tx.Query(ctx, `EXPLAIN (COSTS OFF) EXECUTE explained(`+strings.Join(lits, ", ")+`)`)
	return planText(t, sql, rows, err)
}

// sqlLiteral is a as an untyped SQL literal (a string, an integer, or an
// array of either).
func sqlLiteral(a any) string {
	quote := func(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
	switch v := a.(type) {
	case string:
		return quote(v)
	case []string:
		out := make([]string, len(v))
		for i, s := range v {
			out[i] = `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
		}
		return quote("{" + strings.Join(out, ",") + "}")
	case []int64:
		out := make([]string, len(v))
		for i, n := range v {
			out[i] = fmt.Sprint(n)
		}
		return quote("{" + strings.Join(out, ",") + "}")
	}
	return fmt.Sprint(a)
}

// explain returns the plan of sql with args.
func explain(t *testing.T, e *Engine, sql string, args ...any) string {
	t.Helper()
	rows, err := e.pool.Query(t.Context(), `EXPLAIN (COSTS OFF) `+sql, args...)
	return planText(t, sql, rows, err)
}

// planText is the plan an EXPLAIN of sql returned as rows.
func planText(t *testing.T, sql string, rows pgx.Rows, err error) string {
	t.Helper()
	if err != nil {
		t.Fatalf("EXPLAIN %s: %v", sql, err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatalf("EXPLAIN %s: %v", sql, err)
	}
	return strings.Join(lines, "\n")
}

// TestRoutedShortLeaseLooksOnlyForLocks: a routed lease that comes back
// short because what waits is not for it arms no look (recheckLater):
// the queue's sessions are not woken every recheckAfter for tasks they
// cannot take. One that comes back short because a task it takes was
// locked by another transaction does, as an open lease would.
func TestRoutedShortLeaseLooksOnlyForLocks(t *testing.T) {
	t.Parallel()
	e, schema := openRouteEngine(t, nil)
	armed := func(queue string) bool {
		e.mu.Lock()
		defer e.mu.Unlock()
		q := e.hints.queues[queue]
		return q != nil && q.recheck != nil
	}
	enqueueKinds(t, e, "amo", []broker.Kind{{Type: "a", AtMostOnce: true}})
	if ls := routedLease(t, e, "s", "amo", 5, broker.Route{}); len(ls) != 0 || armed("amo") {
		t.Fatalf("the zero route over an at-most-once task: leased %d, look armed %v; want none, none", len(ls), armed("amo"))
	}
	enqueueKinds(t, e, "typed", []broker.Kind{{Type: "a"}, {Type: "b"}})
	if ls := routedLease(t, e, "s", "typed", 5, broker.Route{Types: []string{"b"}}); len(ls) != 1 || armed("typed") {
		t.Fatalf("a lease of type b over a task of type a: leased %d, look armed %v; want 1, none", len(ls), armed("typed"))
	}
	ids := enqueueKinds(t, e, "locked", []broker.Kind{{Type: "a"}, {Type: "b"}})
	conn, err := pgx.Connect(t.Context(), pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(t.Context()) })
	tx, err := conn.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(t.Context()) }()
	for id, k := range ids {
		if k.Type == "b" {
			if _, err := tx.Exec(t.Context(), "SELECT 1 FROM "+pgx.Identifier{schema, "conveyor_tasks"}.Sanitize()+" WHERE id = $1 FOR UPDATE", id); err != nil {
				t.Fatal(err)
			}
		}
	}
	if ls := routedLease(t, e, "s", "locked", 5, broker.Route{Types: []string{"b"}}); len(ls) != 0 || !armed("locked") {
		t.Fatalf("a lease of type b whose task is locked: leased %d, look armed %v; want none, armed", len(ls), armed("locked"))
	}
}

// TestAuthorizedStartTakenOverFromADeadNode: the tasks a node held when
// it died go back, but an at-most-once task whose start was authorized is
// archived, its outcome unknown (it may have run); one not yet authorized
// is PENDING again, still at most once.
func TestAuthorizedStartTakenOverFromADeadNode(t *testing.T) {
	t.Parallel()
	schema := pgtest.Schema(t, t.Name())
	a, _ := openNode(t, schema)
	b, _ := openNode(t, schema)
	all := broker.Route{StartAuthorization: true}
	started := routedLease(t, a, "s-a", "q", 1, all)
	if len(started) != 0 {
		t.Fatalf("leased %d from an empty queue", len(started))
	}
	enqueueKinds(t, a, "q", []broker.Kind{{Type: "a", AtMostOnce: true}})
	started = routedLease(t, a, "s-a", "q", 1, all)
	enqueueKinds(t, a, "w", []broker.Kind{{Type: "a", AtMostOnce: true}})
	waiting := routedLease(t, a, "s-a", "w", 1, all)
	if len(started) != 1 || len(waiting) != 1 {
		t.Fatalf("leased %d and %d, want one of each", len(started), len(waiting))
	}
	if err := a.AuthorizeStart(t.Context(), broker.StartParams{SessionID: "s-a", Now: time.Now(),
		Lease: broker.LeaseRef{TaskID: started[0].Task.ID, Token: started[0].Token}}); err != nil {
		t.Fatal(err)
	}
	kill(a)
	testwait.Until(t, time.Minute, "the leader to sweep the dead node", func() bool {
		task, err := b.GetTask(t.Context(), waiting[0].Task.ID)
		return err == nil && task.State == broker.StatePending
	})
	task, err := b.GetTask(t.Context(), started[0].Task.ID)
	if err != nil || task.State != broker.StateArchived || task.LastError != broker.OutcomeUnknownPrefix+broker.UnknownRestart {
		t.Fatalf("the authorized task after the takeover: %+v, %v; want ARCHIVED, outcome unknown", task, err)
	}
	if task, err := b.GetTask(t.Context(), waiting[0].Task.ID); err != nil || !task.AtMostOnce || task.Retried != 0 {
		t.Fatalf("the unauthorized task after the takeover: %+v, %v; want PENDING, at most once, no retry", task, err)
	}
	info, err := b.Queue(t.Context(), "q")
	if err != nil || info.Counts[broker.StateArchived] != 1 || info.Counts[broker.StateActive] != 0 {
		t.Fatalf("queue q after the takeover: %+v, %v; want one ARCHIVED, none ACTIVE", info.Counts, err)
	}
}

// TestPassedOverAcrossNodes: a queue one node's routed lease passed over
// hears of each task another node makes ready, though its ready count
// never went back to 0.
func TestPassedOverAcrossNodes(t *testing.T) {
	t.Parallel()
	schema := pgtest.Schema(t, t.Name())
	a, noteA := openNode(t, schema)
	b, _ := openNode(t, schema)
	waitPeers(t, a, b)
	// Node a reads its counts again two beats after it saw b, and signals
	// every queue with work then: past that, only the mark signals.
	seen := a.cluster.beats.Load()
	testwait.Until(t, time.Minute, "node a's resync after it saw b", func() bool { return a.cluster.beats.Load() >= seen+3 })
	enqueueKinds(t, a, "q", []broker.Kind{{Type: "a"}})
	if ls := routedLease(t, a, "s-a", "q", 1, broker.Route{Types: []string{"b"}}); len(ls) != 0 {
		t.Fatalf("a lease of type b leased %d", len(ls))
	}
	before := noteA.readyCount("q")
	enqueueKinds(t, b, "q", []broker.Kind{{Type: "b"}})
	// Well within resyncEvery, whose resync would signal the queue anyway.
	testwait.Until(t, resyncEvery/3, "node a to signal the task of type b", func() bool { return noteA.readyCount("q") > before })
	if ls := routedLease(t, a, "s-a", "q", 1, broker.Route{Types: []string{"b"}}); len(ls) != 1 {
		t.Fatalf("the signaled lease of type b leased %d, want 1", len(ls))
	}
}

// TestTaskReadyDuringAShortRoutedLease: a task that becomes ready while a
// routed lease runs (after its statement read the line, before the lease
// marks the queue passed over) is signaled when the lease comes back
// short: the session it found nothing for would otherwise sleep through
// it, the queue's ready count never having gone back to 0.
func TestTaskReadyDuringAShortRoutedLease(t *testing.T) {
	t.Parallel()
	note := &nodeSignals{ready: map[string]int{}}
	e, _ := openRouteEngine(t, note)
	enqueueKinds(t, e, "q", []broker.Kind{{Type: "a"}})
	since := e.routingStarted("q")
	enqueueKinds(t, e, "q", []broker.Kind{{Type: "b"}})
	before := note.readyCount("q")
	e.routingEnded("q", true, since)
	if got := note.readyCount("q"); got != before+1 {
		t.Fatalf("TasksReady %d times at the end of the short lease, want once", got-before)
	}
	e.routingEnded("q", true, e.routingStarted("q"))
	if got := note.readyCount("q"); got != before+1 {
		t.Fatalf("a short lease with no task made ready meanwhile signaled %d times, want none", got-before-1)
	}
}

// TestAtMostOnceStored: every enqueue path stores AtMostOnce (COPY for
// the ids the engine chooses, INSERT for the caller's, EnqueueTx), and
// every read says it; an at-most-once task cannot join a group.
func TestAtMostOnceStored(t *testing.T) {
	t.Parallel()
	e, _ := openRouteEngine(t, nil)
	ctx := t.Context()
	now := time.Now()
	amo := bt.NewTask("q")
	amo.AtMostOnce = true
	named := amo
	named.ID = bt.NewID()
	res, err := e.Enqueue(ctx, broker.EnqueueParams{Now: now, Tasks: bt.WithStates([]broker.NewTask{amo, named}, now)})
	if err != nil {
		t.Fatal(err)
	}
	txTasks, err := e.EnqueueTx(ctx, broker.EnqueueParams{Now: now, Tasks: bt.WithStates([]broker.NewTask{amo}, now)})
	if err != nil {
		t.Fatal(err)
	}
	ids := []string{res[0].Task.ID, res[1].Task.ID, txTasks[0].ID}
	for i, r := range res {
		if r.Err != nil || !r.Task.AtMostOnce {
			t.Fatalf("Enqueue item %d: %+v", i, r)
		}
	}
	for _, id := range ids {
		if task, err := e.GetTask(ctx, id); err != nil || !task.AtMostOnce {
			t.Fatalf("GetTask %s: AtMostOnce unset (%v)", id, err)
		}
	}
	for _, brief := range []bool{false, true} {
		page, err := e.ListTasks(ctx, broker.ListParams{Queue: "q", State: broker.StatePending, Limit: 10, Brief: brief})
		if err != nil || len(page.Tasks) != 3 {
			t.Fatalf("ListTasks brief %v: %d tasks, %v", brief, len(page.Tasks), err)
		}
		for _, task := range page.Tasks {
			if !task.AtMostOnce {
				t.Fatalf("ListTasks brief %v: task %s with AtMostOnce unset", brief, task.ID)
			}
		}
	}
	grouped := amo
	grouped.Group = "g"
	res, err = e.Enqueue(ctx, broker.EnqueueParams{Now: now, Tasks: bt.WithStates([]broker.NewTask{grouped}, now)})
	if err != nil || res[0].Err == nil {
		t.Fatalf("an at-most-once task in a group was stored: %+v, %v", res, err)
	}
}

// TestRouteNamingAnUnstorableType: a worker may name a type no task here
// can have (one with a NUL, which an enqueue refuses): its leases take
// the types it names that can exist, and fail for none.
func TestRouteNamingAnUnstorableType(t *testing.T) {
	t.Parallel()
	e, _ := openNode(t, pgtest.Schema(t, t.Name()))
	now := time.Now()
	a := bt.NewTask("q")
	a.Type = "a"
	ids := enqueueAt(t, e, now, a, bt.NewTask("q"))
	for _, c := range []struct {
		route broker.Route
		want  []string
	}{
		{broker.Route{Types: []string{"x\x00"}}, nil},
		{broker.Route{Types: []string{"a", "x\x00"}}, []string{ids[0].ID}},
		{broker.Route{Except: []string{"a", "x\x00"}}, []string{ids[1].ID}},
	} {
		ls, err := e.Lease(t.Context(), broker.LeaseParams{SessionID: "s", Now: now, TTL: time.Hour, Route: c.route,
			Picks: []broker.QueuePick{{Queue: "q", N: 2}}})
		var got []string
		for _, l := range ls {
			got = append(got, l.Task.ID)
		}
		if err != nil || !slices.Equal(got, c.want) {
			t.Fatalf("route %q except %q: leased %v, %v; want %v", c.route.Types, c.route.Except, got, err, c.want)
		}
	}
}
