package postgres_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/conveyor-dev/conveyor/broker"
	bt "github.com/conveyor-dev/conveyor/broker/brokertest"
	"github.com/conveyor-dev/conveyor/broker/postgres"
	"github.com/conveyor-dev/conveyor/internal/pgtest"
)

// twoSessionNodes opens two engines on one schema: two nodes of one service.
func twoSessionNodes(t *testing.T, store string) (a, b *postgres.Engine) {
	t.Helper()
	a = openEngine(t, store, postgres.Config{MaxConns: 2})
	b = openEngine(t, store, postgres.Config{MaxConns: 2})
	if a.NodeID() == b.NodeID() {
		t.Fatalf("two engines share the node id %s", a.NodeID())
	}
	return a, b
}

func sessionIDs(t *testing.T, r broker.SessionRegistry) map[string]broker.SessionInfo {
	t.Helper()
	list, err := r.Sessions(t.Context())
	if err != nil {
		t.Fatalf("Sessions: %v", err)
	}
	out := map[string]broker.SessionInfo{}
	for i, s := range list {
		if i > 0 && list[i-1].ID >= s.ID {
			t.Errorf("Sessions not ordered by id: %s before %s", list[i-1].ID, s.ID)
		}
		out[s.ID] = s
	}
	return out
}

func TestSessionRegistryAcrossNodes(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	a, b := twoSessionNodes(t, t.Name())
	connected := time.Unix(1_700_000_000, 5).UTC()
	sa := broker.SessionInfo{ID: "01SESSIONA", Node: "ignored", Queues: map[string]int32{"mail": 2, "sms": 1},
		Concurrency: 4, Labels: map[string]string{"host": "w1"}, SDKVersion: "1.2.3",
		BatchTypes: []string{"digest"}, ConnectedAt: connected}
	sb := broker.SessionInfo{ID: "01SESSIONB", Queues: map[string]int32{"mail": 1}, Concurrency: 1, ConnectedAt: connected}
	if err := a.OpenSession(ctx, sa); err != nil {
		t.Fatalf("OpenSession on a: %v", err)
	}
	if err := b.OpenSession(ctx, sb); err != nil {
		t.Fatalf("OpenSession on b: %v", err)
	}

	// A task leased by a's session shows among its tasks, from either node.
	res, err := a.Enqueue(ctx, broker.EnqueueParams{Now: connected, Tasks: bt.WithStates([]broker.NewTask{bt.NewTask("mail")}, connected)})
	if err != nil || res[0].Err != nil {
		t.Fatalf("Enqueue: %v, %v", err, res[0].Err)
	}
	task := res[0].Task.ID
	leases, err := a.Lease(ctx, broker.LeaseParams{SessionID: sa.ID, Picks: []broker.QueuePick{{Queue: "mail", N: 1}},
		Now: connected, TTL: time.Hour})
	if err != nil || len(leases) != 1 {
		t.Fatalf("Lease: %v, %d leases", err, len(leases))
	}

	for name, r := range map[string]*postgres.Engine{"a": a, "b": b} {
		got := sessionIDs(t, r)
		if len(got) != 2 {
			t.Fatalf("%s lists %d sessions, want 2: %+v", name, len(got), got)
		}
		ga, gb := got[sa.ID], got[sb.ID]
		if ga.Node != a.NodeID() || gb.Node != b.NodeID() {
			t.Errorf("%s: nodes %q and %q, want %q and %q", name, ga.Node, gb.Node, a.NodeID(), b.NodeID())
		}
		if ga.Queues["mail"] != 2 || ga.Queues["sms"] != 1 || ga.Concurrency != 4 || ga.Labels["host"] != "w1" ||
			ga.SDKVersion != "1.2.3" || !slices.Equal(ga.BatchTypes, []string{"digest"}) || !ga.ConnectedAt.Equal(connected) ||
			!ga.LastHeartbeat.IsZero() {
			t.Errorf("%s: session a read back as %+v", name, ga)
		}
		if !slices.Equal(ga.TaskIDs, []string{task}) || len(gb.TaskIDs) != 0 {
			t.Errorf("%s: tasks %v and %v, want [%s] and none", name, ga.TaskIDs, gb.TaskIDs, task)
		}
	}

	// The loads: a's session is updated, an unknown one is reported missing,
	// and b's sessions are b's alone to update or forget.
	beat := connected.Add(time.Minute)
	missing, err := a.UpdateSessions(ctx, []broker.SessionLoad{{ID: sa.ID, InFlight: 3, LastHeartbeat: beat}, {ID: "01UNKNOWN"}, {ID: sb.ID}})
	if err != nil {
		t.Fatalf("UpdateSessions: %v", err)
	}
	if !slices.Equal(missing, []string{"01UNKNOWN", sb.ID}) {
		t.Errorf("missing = %v, want the unknown session and b's", missing)
	}
	got := sessionIDs(t, b)
	if got[sa.ID].InFlight != 3 || !got[sa.ID].LastHeartbeat.Equal(beat) || got[sb.ID].InFlight != 0 {
		t.Errorf("after the update: %+v", got)
	}

	// A load list without a session forgets it (its close was lost), on
	// that node only.
	if missing, err := a.UpdateSessions(ctx, nil); err != nil || len(missing) != 0 {
		t.Fatalf("UpdateSessions(nil): %v, %v", missing, err)
	}
	if got := sessionIDs(t, b); len(got) != 1 || got[sb.ID].ID == "" {
		t.Errorf("after a's empty update: %+v, want b's session alone", got)
	}
	if err := a.CloseSession(ctx, sb.ID); err != nil {
		t.Fatalf("CloseSession of another node's session: %v", err)
	}
	if got := sessionIDs(t, a); len(got) != 1 {
		t.Errorf("a closed b's session: %+v", got)
	}
	if err := b.CloseSession(ctx, sb.ID); err != nil {
		t.Fatalf("CloseSession: %v", err)
	}
	if got := sessionIDs(t, a); len(got) != 0 {
		t.Errorf("after the close: %+v", got)
	}
}

func TestSessionsGoWithTheirNode(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	store := t.Name()
	a, b := twoSessionNodes(t, store)
	for i, e := range []*postgres.Engine{a, a, b} {
		if err := e.OpenSession(ctx, broker.SessionInfo{ID: "01S" + string(rune('A'+i)), Queues: map[string]int32{"q": 1},
			Concurrency: 1, ConnectedAt: time.Now()}); err != nil {
			t.Fatalf("OpenSession %d: %v", i, err)
		}
	}
	// The leader's sweep deletes a dead node's row.
	deleteNode(ctx, t, store, a.NodeID())
	got := sessionIDs(t, b)
	if len(got) != 1 || got["01SC"].Node != b.NodeID() {
		t.Errorf("after a's row went: %+v, want b's session alone", got)
	}
	// What the dead node still writes is refused: its row is gone.
	if err := a.OpenSession(ctx, broker.SessionInfo{ID: "01SD", ConnectedAt: time.Now()}); err == nil {
		t.Error("OpenSession of a node whose row is gone succeeded")
	}
}

// deleteNode deletes a node's row, as the leader does of a dead node.
func deleteNode(ctx context.Context, t *testing.T, store, id string) {
	t.Helper()
	schema, _ := schemas.Load(store)
	conn, err := pgx.Connect(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	tag, err := conn.Exec(ctx, "DELETE FROM "+pgx.Identifier{schema.(string), "conveyor_nodes"}.Sanitize()+" WHERE id = $1", id)
	if err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("delete node %s: %v, %d rows", id, err, tag.RowsAffected())
	}
}
