package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/conveyor-dev/conveyor/cmd/conveyor/bench"
	"github.com/conveyor-dev/conveyor/internal/pgtest"
)

// benchLiveness is the nodes' liveness in these tests: a node learns its
// peers at its heartbeat (a fifth of it), so a short one lets the nodes
// pass tasks to each other within a second of starting.
const benchLiveness = time.Second

// TestBenchNodesW3 drains W3 with two nodes on one PostgreSQL schema, two
// workers on each (whose leases each node merges): the run lists each
// server's CPU and PostgreSQL's.
func TestBenchNodesW3(t *testing.T) {
	bin := conveyorBinary(t)
	res := bench.Run(context.Background(), bench.Config{Workload: "W3", Binary: bin, N: 2000, Concurrency: 8, Workers: 2,
		Nodes: 2, NodeLiveness: benchLiveness, DatabaseURL: pgtest.URL(t), Timeout: 2 * time.Minute})
	if !res.OK {
		t.Fatalf("W3 on two nodes failed: %s", res.Err)
	}
	if len(res.Servers) != 2 || res.Servers[0].Node == res.Servers[1].Node {
		t.Fatalf("servers %+v; want two nodes", res.Servers)
	}
	for _, s := range res.Servers {
		if s.Seconds <= 0 || s.Pct <= 0 || s.PeakRSSMB <= 0 || s.Killed {
			t.Errorf("server %+v: want its CPU and memory over the run", s)
		}
	}
	if res.CPUPostgres == nil || res.CPUPostgres.Seconds <= 0 {
		t.Errorf("PostgreSQL's CPU %+v; want some", res.CPUPostgres)
	}
	if res.Settings["nodes"] != "2" || !strings.HasPrefix(res.Settings["workers"], "4, 2 per node") {
		t.Errorf("settings %v do not say two nodes with two workers each", res.Settings)
	}
}

// TestBenchNodesW4Cross runs W4 with its producers on one node and its
// workers on the other: every task is dispatched by the node that did not
// take it, and the run completes.
func TestBenchNodesW4Cross(t *testing.T) {
	bin := conveyorBinary(t)
	res := bench.Run(context.Background(), bench.Config{Workload: "W4", Binary: bin, Rate: 200, Duration: 2 * time.Second,
		Producers: 4, Concurrency: 8, Nodes: 2, Cross: true, NodeLiveness: benchLiveness, DatabaseURL: pgtest.URL(t),
		Timeout: 2 * time.Minute})
	if !res.OK {
		t.Fatalf("W4 across two nodes failed: %s", res.Err)
	}
	if res.N != 400 || res.P99Ms <= 0 || len(res.Servers) != 2 {
		t.Errorf("n %d, p99 %v ms, servers %+v; want 400 tasks timed on two nodes", res.N, res.P99Ms, res.Servers)
	}
	if !strings.HasPrefix(res.Settings["workers"], "1, 1 per node") {
		t.Errorf("workers %q; want the one worker node's", res.Settings["workers"])
	}
}

// TestBenchNodesKillLeader kills the leader while W3 drains on two nodes:
// the survivor becomes leader, the killed node's worker opens its next
// session with it, the tasks it held come back, and every task completes.
func TestBenchNodesKillLeader(t *testing.T) {
	bin := conveyorBinary(t)
	res := bench.Run(context.Background(), bench.Config{Workload: "W3", Binary: bin, N: 10000, Concurrency: 8,
		Nodes: 2, NodeLiveness: benchLiveness, KillLeaderAfter: 100 * time.Millisecond, DatabaseURL: pgtest.URL(t),
		Timeout: 2 * time.Minute})
	if !res.OK {
		t.Fatalf("W3 with the leader killed failed: %s", res.Err)
	}
	f := res.Failover
	if f == nil || f.KilledNode == "" || f.NewLeader == "" || f.NewLeader == f.KilledNode || f.NewLeaderMs <= 0 {
		t.Fatalf("failover %+v; want the killed node and another named leader after it", f)
	}
	if f.WorkersOnKilled != 1 || f.WorkersBackMs <= 0 || f.NodeLiveness != benchLiveness.String() || f.MaxGapMs <= 0 {
		t.Errorf("failover %+v; want the killed node's worker back, the liveness and a gap", f)
	}
	killed := 0
	for _, s := range res.Servers {
		if s.Killed {
			killed++
			if s.Node != f.KilledNode {
				t.Errorf("server %s marked killed, the failover killed %s", s.Node, f.KilledNode)
			}
		}
	}
	if killed != 1 {
		t.Errorf("servers %+v; want one killed", res.Servers)
	}
}
