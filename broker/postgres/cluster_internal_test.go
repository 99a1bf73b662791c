package postgres

import (
	"sync"
	"testing"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
	bt "github.com/conveyor-dev/conveyor/broker/brokertest"
	"github.com/conveyor-dev/conveyor/internal/pgtest"
	"github.com/conveyor-dev/conveyor/internal/testwait"
)

// nodeSignals records what an engine told its node.
type nodeSignals struct {
	broker.NopNotifier
	mu       sync.Mutex
	ready    map[string]int
	canceled []broker.LapsedLease
}

func (s *nodeSignals) TasksReady(queue string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ready[queue]++
}

func (s *nodeSignals) RunningCanceled(l broker.LapsedLease) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.canceled = append(s.canceled, l)
}

func (s *nodeSignals) readyCount(queue string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ready[queue]
}

func (s *nodeSignals) canceledTasks() []broker.LapsedLease {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]broker.LapsedLease(nil), s.canceled...)
}

// testLiveness is short, so that the tests see nodes die and leaders
// change in a second or two: a beat every 200 ms, a term of 333 ms.
const testLiveness = time.Second

// openNode opens one node (an engine) on schema.
func openNode(t *testing.T, schema string) (*Engine, *nodeSignals) {
	t.Helper()
	return openNodeWith(t, schema, broker.GroupPolicy{})
}

// openNodeWith opens one node whose queues' groups go by groups.
func openNodeWith(t *testing.T, schema string, groups broker.GroupPolicy) (*Engine, *nodeSignals) {
	t.Helper()
	note := &nodeSignals{ready: map[string]int{}}
	e, err := Open(t.Context(), Config{URL: pgtest.URL(t), Schema: schema, Notifier: note, MaxConns: 4,
		Liveness: testLiveness, NodeAddress: "node-" + t.Name(), GroupDefaults: groups})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return e, note
}

// kill stops e as a SIGKILL would: no heartbeat, no notifications, no
// leaving; its rows stay in the database until the leader sweeps them.
func kill(e *Engine) {
	e.stopHeartbeat()
	e.events.stop()
	e.closeOnce.Do(func() {
		e.mu.Lock()
		e.closed = true
		e.stopRechecksLocked()
		e.mu.Unlock()
		e.pool.Close()
	})
}

// waitPeers waits until each of two nodes counts the other live.
func waitPeers(t *testing.T, a, b *Engine) {
	t.Helper()
	testwait.Until(t, time.Minute, "each node to see the other", func() bool {
		return a.events.peers.Load() == 1 && b.events.peers.Load() == 1
	})
}

func leading(e *Engine) bool {
	l, _ := e.Leading()
	return l
}

func enqueue(t *testing.T, e *Engine, queue string) string {
	t.Helper()
	return enqueueAt(t, e, time.Now(), bt.NewTask(queue))[0].ID
}

// enqueueAt enqueues tasks at now and returns them as stored; any that
// fails fails the test.
func enqueueAt(t *testing.T, e *Engine, now time.Time, tasks ...broker.NewTask) []*broker.Task {
	t.Helper()
	res, err := e.Enqueue(t.Context(), broker.EnqueueParams{Now: now, Tasks: bt.WithStates(tasks, now)})
	if err != nil {
		t.Fatal(err)
	}
	out := make([]*broker.Task, len(res))
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("enqueue item %d: %v", i, r.Err)
		}
		out[i] = r.Task
	}
	return out
}

// waitBlockedBy waits until a statement whose text is like (a LIKE
// pattern) waits for a lock the backend pid holds.
func waitBlockedBy(t *testing.T, e *Engine, pid int, like, what string) {
	t.Helper()
	testwait.Until(t, 30*time.Second, what, func() bool {
		var n int
		if err := e.pool.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity
			WHERE $1 = ANY(pg_blocking_pids(pid)) AND query LIKE $2`, pid, like).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n > 0
	})
}

func lease(t *testing.T, e *Engine, session, queue string) broker.Lease {
	t.Helper()
	ls, err := e.Lease(t.Context(), broker.LeaseParams{SessionID: session, Now: time.Now(), TTL: time.Hour,
		Picks: []broker.QueuePick{{Queue: queue, N: 1}}})
	if err != nil || len(ls) != 1 {
		t.Fatalf("Lease on %s: %d leases, %v", e.NodeID(), len(ls), err)
	}
	return ls[0]
}

func readyOn(e *Engine, queue string) int {
	n := []int{0}
	e.Ready([]string{queue}, n)
	return n[0]
}

// TestNodesOneLeader: two nodes on one database both list both; exactly
// one leads; when it leaves, the other takes over with a higher term.
func TestNodesOneLeader(t *testing.T) {
	t.Parallel()
	schema := pgtest.Schema(t, t.Name())
	a, _ := openNode(t, schema)
	b, _ := openNode(t, schema)
	nodes, err := b.Nodes(t.Context())
	if err != nil || len(nodes) != 2 {
		t.Fatalf("Nodes: %+v, %v; want both nodes", nodes, err)
	}
	if !leading(a) || leading(b) {
		t.Fatalf("leading: a %v, b %v; want the first node to lead", leading(a), leading(b))
	}
	if !nodes[0].Leader && !nodes[1].Leader {
		t.Fatalf("Nodes names no leader: %+v", nodes)
	}
	a.cluster.mu.Lock()
	termA := a.cluster.term
	a.cluster.mu.Unlock()
	_, changed := b.Leading()
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	case <-time.After(time.Minute):
		t.Fatal("the second node did not take over within a minute")
	}
	b.cluster.mu.Lock()
	termB := b.cluster.term
	b.cluster.mu.Unlock()
	if !leading(b) || termB <= termA {
		t.Fatalf("after the leader left: b leads %v with term %d; want it leading with a term above %d", leading(b), termB, termA)
	}
	if nodes, err := b.Nodes(t.Context()); err != nil || len(nodes) != 1 || nodes[0].ID != b.NodeID() {
		t.Fatalf("Nodes after a left: %+v, %v", nodes, err)
	}
}

// TestTaskReadyAcrossNodes: a task enqueued on one node wakes the idle
// sessions of another, which can lease it; the lease is counted on both.
func TestTaskReadyAcrossNodes(t *testing.T) {
	t.Parallel()
	schema := pgtest.Schema(t, t.Name())
	a, _ := openNode(t, schema)
	b, noteB := openNode(t, schema)
	waitPeers(t, a, b)
	id := enqueue(t, a, "q")
	testwait.Until(t, time.Minute, "node b to be told the task is ready", func() bool { return noteB.readyCount("q") > 0 && readyOn(b, "q") == 1 })
	l := lease(t, b, "s-b", "q")
	if l.Task.ID != id {
		t.Fatalf("b leased %s, want %s", l.Task.ID, id)
	}
	testwait.Until(t, time.Minute, "node a to count the task ACTIVE", func() bool {
		info, err := a.Queue(t.Context(), "q")
		return err == nil && info.Counts[broker.StateActive] == 1 && readyOn(a, "q") == 0
	})
}

// TestDeadNodeTasksGoBack: the tasks a node held when it died go back to
// PENDING once its liveness lapsed, with no retry counted, and another
// node leases them; the dead node leaves the list.
func TestDeadNodeTasksGoBack(t *testing.T) {
	t.Parallel()
	schema := pgtest.Schema(t, t.Name())
	a, _ := openNode(t, schema)
	b, _ := openNode(t, schema)
	id := enqueue(t, a, "q")
	held := lease(t, a, "s-a", "q")
	deadID := a.NodeID()
	kill(a)
	testwait.Until(t, time.Minute, "the leader to sweep the dead node", func() bool {
		task, err := b.GetTask(t.Context(), id)
		return err == nil && task.State == broker.StatePending
	})
	task, err := b.GetTask(t.Context(), id)
	if err != nil || task.Retried != 0 {
		t.Fatalf("released task: %+v, %v; want no retry counted", task, err)
	}
	testwait.Until(t, time.Minute, "node b to count the task ready again", func() bool { return readyOn(b, "q") == 1 })
	again := lease(t, b, "s-b", "q")
	if again.Task.ID != id || again.Token == held.Token {
		t.Fatalf("re-leased %s with token %d; want %s with a new token (old %d)", again.Task.ID, again.Token, id, held.Token)
	}
	if _, err := b.Complete(t.Context(), broker.Completed("s-a", broker.LeaseRef{TaskID: id, Token: held.Token}, time.Now(), nil)); err == nil {
		t.Fatal("the dead node's late Result was accepted; want its lease refused")
	}
	nodes, err := b.Nodes(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if n.ID == deadID {
			t.Fatalf("the dead node %s is still listed: %+v", deadID, nodes)
		}
	}
}

// TestCancelReachesTheHoldingNode: a running task canceled through one
// node is announced to the node whose session holds it, from the moment
// the second node joined (not from its first heartbeat).
func TestCancelReachesTheHoldingNode(t *testing.T) {
	t.Parallel()
	schema := pgtest.Schema(t, t.Name())
	a, noteA := openNode(t, schema)
	b, _ := openNode(t, schema)
	id := enqueue(t, a, "q")
	held := lease(t, a, "s-a", "q")
	res, err := b.Act(t.Context(), broker.ActParams{Action: broker.ActionCancel, IDs: []string{id}, Now: time.Now()})
	if err != nil || res[0].Err != nil || res[0].Running == nil {
		t.Fatalf("cancel: %+v, %v", res, err)
	}
	testwait.Until(t, time.Minute, "node a to be told of the cancel", func() bool {
		got := noteA.canceledTasks()
		return len(got) == 1 && got[0].SessionID == "s-a" && got[0].Lease == broker.LeaseRef{TaskID: id, Token: held.Token}
	})
}

// TestNodeDeclaredDeadRejoins: a node whose row was swept (it was cut off
// longer than its liveness) rejoins under a new id on its next beat.
func TestNodeDeclaredDeadRejoins(t *testing.T) {
	t.Parallel()
	schema := pgtest.Schema(t, t.Name())
	a, _ := openNode(t, schema)
	old := a.NodeID()
	if _, err := a.pool.Exec(t.Context(), `DELETE FROM conveyor_nodes WHERE id = $1`, old); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, time.Minute, "the node to rejoin", func() bool { return a.NodeID() != old })
	nodes, err := a.Nodes(t.Context())
	if err != nil || len(nodes) != 1 || nodes[0].ID != a.NodeID() {
		t.Fatalf("Nodes after the rejoin: %+v, %v", nodes, err)
	}
}

// TestSweepNeedsTheTerm: a sweep under a term the node no longer holds is
// refused, and the node stops believing it leads.
func TestSweepNeedsTheTerm(t *testing.T) {
	t.Parallel()
	schema := pgtest.Schema(t, t.Name())
	a, _ := openNode(t, schema)
	if !leading(a) {
		t.Fatal("a lone node does not lead")
	}
	if _, err := a.pool.Exec(t.Context(), `UPDATE conveyor_leader SET term = term + 1, node = 'someone else'`); err != nil {
		t.Fatal(err)
	}
	if err := a.sweep(t.Context()); err != nil {
		t.Fatal(err)
	}
	if leading(a) {
		t.Fatal("the node still leads after its term was taken")
	}
}

// TestUniqueKeyRaceAcrossNodes: enqueues of one unique key racing on two
// nodes store one task, round after round. (Before the claim re-read its
// holder after the lock, the loser of the race read the winner's task as
// missing and took the key over.)
func TestUniqueKeyRaceAcrossNodes(t *testing.T) {
	t.Parallel()
	schema := pgtest.Schema(t, t.Name())
	nodes := [2]*Engine{}
	nodes[0], _ = openNode(t, schema)
	nodes[1], _ = openNode(t, schema)
	for round := range 20 {
		key := "k" + string(rune('a'+round))
		var wg sync.WaitGroup
		stored := make(chan string, 8)
		for i := range 8 {
			wg.Go(func() {
				now := time.Now()
				nt := bt.NewTask("q")
				nt.UniqueKey = key
				res, err := nodes[i%2].Enqueue(t.Context(), broker.EnqueueParams{Now: now, Tasks: bt.WithStates([]broker.NewTask{nt}, now)})
				if err != nil {
					t.Error(err)
					return
				}
				if res[0].Err == nil {
					stored <- res[0].Task.ID
				}
			})
		}
		wg.Wait()
		close(stored)
		var ids []string
		for id := range stored {
			ids = append(ids, id)
		}
		if len(ids) != 1 {
			t.Fatalf("round %d: %d enqueues of unique key %q stored a task (%v), want 1", round, len(ids), key, ids)
		}
	}
}

// TestListenerCutReadsCountsAgain: a node whose listener's connection was
// cut misses the notifications sent meanwhile; once it listens again it
// reads its counts from the database, so a task enqueued on another node
// in the gap still reaches its sessions.
func TestListenerCutReadsCountsAgain(t *testing.T) {
	t.Parallel()
	schema := pgtest.Schema(t, t.Name())
	a, _ := openNode(t, schema)
	b, noteB := openNode(t, schema)
	// Past the read of the counts b makes two beats after it joined: what
	// it learns from here on is from notifications, or from the read its
	// listener's reconnection makes.
	testwait.Until(t, time.Minute, "node b to be past its first read of the counts", func() bool {
		return b.events.peers.Load() == 1 && b.cluster.beats.Load() >= 4
	})
	pid := b.events.listenerPID.Load()
	// The listener is gone before the enqueue: its notification is lost.
	if _, err := a.pool.Exec(t.Context(), `SELECT pg_terminate_backend($1)`, int32(pid)); err != nil {
		t.Fatal(err)
	}
	enqueue(t, a, "q")
	// Within resyncEvery's half: the periodic read must not be what finds it.
	testwait.Until(t, resyncEvery/2, "node b to listen again and count the task", func() bool {
		return b.events.listenerPID.Load() != pid && readyOn(b, "q") == 1 && noteB.readyCount("q") > 0
	})
}

// TestResyncCountsANotifiedChangeOnce: a change of another node that a
// resync read, and whose notification arrives after the resync, is
// counted once. (Before, it was counted twice until the next resync: a
// node's counts off for up to 30 s, its sessions woken for nothing.)
func TestResyncCountsANotifiedChangeOnce(t *testing.T) {
	t.Parallel()
	schema := pgtest.Schema(t, t.Name())
	a, _ := openNode(t, schema)
	b, _ := openNode(t, schema)
	waitPeers(t, a, b)
	conn, err := b.pool.Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	// Node b's listener is held (as while a resync runs) when the
	// notification of the enqueue arrives; the resync reads the task.
	b.remote.Lock()
	received := b.events.received.Load()
	enqueue(t, a, "q")
	testwait.Until(t, time.Minute, "node b to receive the notification", func() bool {
		return b.events.received.Load() > received
	})
	if err := b.resyncLocked(t.Context(), conn); err != nil {
		b.remote.Unlock()
		t.Fatal(err)
	}
	b.remote.Unlock()
	// The held notification is applied once the lock is free: wait until
	// the listener has been through it (another enqueue's notification is
	// applied after it, in order).
	received = b.events.received.Load()
	enqueue(t, a, "other")
	testwait.Until(t, time.Minute, "node b to apply the next notification", func() bool {
		return b.events.received.Load() > received && readyOn(b, "other") == 1
	})
	if got := readyOn(b, "q"); got != 1 {
		t.Fatalf("node b counts %d ready in q, want the 1 task enqueued", got)
	}
}

// TestDependencyAcrossNodes: a task waiting for a task of another node is
// released when that one completes there, and the node it waits on counts
// it ready (its sessions are woken) from the other's notification.
func TestDependencyAcrossNodes(t *testing.T) {
	t.Parallel()
	schema := pgtest.Schema(t, t.Name())
	a, _ := openNode(t, schema)
	b, noteB := openNode(t, schema)
	parent := enqueue(t, a, "q")
	now := time.Now()
	child := bt.NewTask("after")
	child.DependsOn = []broker.Dependency{{TaskID: parent}}
	res, err := b.Enqueue(t.Context(), broker.EnqueueParams{Now: now, Tasks: bt.WithStates([]broker.NewTask{child}, now)})
	if err != nil || res[0].Err != nil || res[0].Task.State != broker.StateBlocked {
		t.Fatalf("enqueue the child on b: %+v, %v", res, err)
	}
	held := lease(t, a, "s-a", "q")
	if _, err := a.Complete(t.Context(), broker.Completed("s-a", broker.LeaseRef{TaskID: parent, Token: held.Token}, time.Now(), nil)); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, time.Minute, "node b to count the child ready", func() bool {
		return readyOn(b, "after") == 1 && noteB.readyCount("after") > 0
	})
	if got := lease(t, b, "s-b", "after"); got.Task.ID != res[0].Task.ID {
		t.Fatalf("b leased %s, want the child %s", got.Task.ID, res[0].Task.ID)
	}
}

// TestGroupGathersAcrossNodes: members of one group enqueued on two nodes
// gather into one instance, which fires at its size and is delivered
// whole, from either node.
func TestGroupGathersAcrossNodes(t *testing.T) {
	t.Parallel()
	schema := pgtest.Schema(t, t.Name())
	policy := broker.GroupPolicy{MaxSize: 2, MaxDelay: time.Hour, GracePeriod: time.Hour}
	a, _ := openNodeWith(t, schema, policy)
	b, _ := openNodeWith(t, schema, policy)
	var ids []string
	for _, e := range []*Engine{a, b} {
		now := time.Now()
		nt := bt.NewTask("g")
		nt.Group = "batch"
		res, err := e.Enqueue(t.Context(), broker.EnqueueParams{Now: now, Tasks: bt.WithStates([]broker.NewTask{nt}, now)})
		if err != nil || res[0].Err != nil {
			t.Fatalf("enqueue a member on %s: %+v, %v", e.NodeID(), res, err)
		}
		ids = append(ids, res[0].Task.ID)
	}
	counts := []int{0}
	testwait.Until(t, time.Minute, "node a to count the fired group", func() bool {
		a.ReadyGroups([]string{"g"}, []string{bt.NewTask("g").Type}, counts)
		return counts[0] == 1
	})
	gl, err := a.LeaseGroups(t.Context(), broker.GroupLeaseParams{SessionID: "s-a", Queue: "g", Types: []string{bt.NewTask("g").Type},
		N: 1, Now: time.Now(), TTL: time.Hour})
	if err != nil || len(gl) != 1 || len(gl[0].Leases) != 2 {
		t.Fatalf("LeaseGroups on a: %+v, %v; want one group of both members %v", gl, err, ids)
	}
}

// TestSweepReleasesLeasesWhenTheNodesChange: the leader's sweep releases
// the leases of nodes that are gone when the set of nodes changed since
// its last release, and at least every fullSweepEvery sweeps; between, it
// does not read the leases.
func TestSweepReleasesLeasesWhenTheNodesChange(t *testing.T) {
	t.Parallel()
	// A liveness of an hour: no beat of its own sweeps meanwhile.
	e, err := Open(t.Context(), Config{URL: pgtest.URL(t), Schema: pgtest.Schema(t, t.Name()), MaxConns: 4, Liveness: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	if !leading(e) {
		t.Fatal("a lone node does not lead")
	}
	ctx := t.Context()
	id := enqueue(t, e, "q")
	lease(t, e, "s", "q")
	// orphan stamps the task's lease with a node that is not there.
	orphan := func() {
		t.Helper()
		if _, err := e.pool.Exec(ctx, `UPDATE conveyor_tasks SET lease_node = 'n-gone' WHERE id = $1 AND state = 3`, id); err != nil {
			t.Fatal(err)
		}
	}
	state := func() broker.State {
		t.Helper()
		var s broker.State
		if err := e.pool.QueryRow(ctx, `SELECT state FROM conveyor_tasks WHERE id = $1`, id).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	sweep := func() {
		t.Helper()
		if err := e.sweep(ctx); err != nil {
			t.Fatal(err)
		}
	}

	orphan()
	for i := range fullSweepEvery - 1 {
		sweep()
		if s := state(); s != broker.StateActive {
			t.Fatalf("sweep %d with the nodes unchanged released the lease (the task is %v)", i+1, s)
		}
	}
	sweep()
	if s := state(); s != broker.StatePending {
		t.Fatalf("after %d sweeps the task is %v, want PENDING (released)", fullSweepEvery, s)
	}

	lease(t, e, "s", "q")
	orphan()
	sweep()
	if s := state(); s != broker.StateActive {
		t.Fatalf("a sweep right after a release released the lease (the task is %v)", s)
	}
	if _, err := e.pool.Exec(ctx, `INSERT INTO conveyor_nodes (id, address, version) VALUES ('n-new', '', '')`); err != nil {
		t.Fatal(err)
	}
	sweep()
	if s := state(); s != broker.StatePending {
		t.Fatalf("after a node joined, the sweep left the task %v, want PENDING (released)", s)
	}
}
