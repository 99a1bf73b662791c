package bench

import (
	"context"
	"strings"
	"testing"
	"time"
)

// Several nodes need a database, --cross needs W4 and a second node,
// --kill-leader-after W3 or SOAK on several nodes: each refusal says so
// before any server starts.
func TestNodesRefused(t *testing.T) {
	const db = "postgres://nowhere.invalid/db"
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{Workload: "W1", Nodes: 2}, "--nodes 2 needs --database-url"},
		{Config{Workload: "W1", Nodes: 2, DatabaseURL: db, Addr: "http://127.0.0.1:1"}, "do not pass --addr"},
		{Config{Workload: "MEM", Nodes: 2, DatabaseURL: db}, "MEM measures one server"},
		{Config{Workload: "W3", Nodes: 2, DatabaseURL: db, Cross: true}, "--cross applies to W4"},
		{Config{Workload: "W4", DatabaseURL: db, Cross: true}, "--cross applies to W4 with --nodes 2"},
		{Config{Workload: "W4", Nodes: 2, DatabaseURL: db, KillLeaderAfter: time.Second}, "--kill-leader-after applies to W3 and SOAK"},
		{Config{Workload: "W3", DatabaseURL: db, KillLeaderAfter: time.Second}, "--kill-leader-after applies to W3 and SOAK with --nodes 2"},
		{Config{Workload: "W3", NodeLiveness: time.Second}, "--node-liveness applies to --nodes 2"},
	} {
		res := Run(context.Background(), c.cfg)
		if res.OK || !strings.Contains(res.Err, c.want) {
			t.Errorf("%+v: ok %v, err %q; want a refusal saying %q", c.cfg, res.OK, res.Err, c.want)
		}
	}
}

// The failover's gap runs from the last start before the kill to the
// last start before the window's end, and says where it began.
func TestMaxGapAround(t *testing.T) {
	starts := []int64{10, 20, 30, 95, 100, 400, 410, 2000}
	if gap, at := maxGapAround(starts, 50, 1000); gap != 300 || at != 100 {
		t.Errorf("gap %d at %d, want 300 at 100 (the quiet time after the window is not the failover's)", gap, at)
	}
	if gap, at := maxGapAround(starts, 5, 1000); gap != 300 || at != 100 {
		t.Errorf("kill before every start: gap %d at %d, want 300 at 100", gap, at)
	}
	if gap, at := maxGapAround([]int64{10, 20}, 500, 1000); gap != 0 || at != 20 {
		t.Errorf("no start after the kill: gap %d at %d, want 0 at 20", gap, at)
	}
}

// A /proc/<pid>/stat line: the name may hold spaces and parentheses; the
// process's own CPU and its waited-for children's are told apart.
func TestParseStat(t *testing.T) {
	line := "42 (post (gres) x) S 1 42 42 0 -1 4194560 100 0 0 0 7 3 20 5 20 0 1 0 100 1000 10"
	comm, own, children, ok := parseStat(line)
	if !ok || comm != "post (gres) x" || own != 10 || children != 25 {
		t.Fatalf("comm %q own %d children %d ok %v; want \"post (gres) x\" 10 25 true", comm, own, children, ok)
	}
	if _, _, _, ok := parseStat("42 (short) S 1 2"); ok {
		t.Error("a short line parsed")
	}
}
