package bench

import (
	"context"
	"testing"

	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

// TestAddrRunNamesTheServersEngine: a run against a running server
// (--addr) records the engine that server runs on, and its durability,
// not the fresh server's default.
func TestAddrRunNamesTheServersEngine(t *testing.T) {
	srv := servertest.Start(t, server.Config{})
	res := Run(context.Background(), Config{Workload: "W1", N: 10, Addr: srv.URL()})
	if !res.OK {
		t.Fatalf("W1 against %s: %s", srv.URL(), res.Err)
	}
	want := map[string]string{servertest.EngineBolt: "fsync per group commit (bbolt)",
		servertest.EnginePostgres: "PostgreSQL commit per transaction (the server's synchronous_commit)"}
	if got := res.Settings["broker"]; got != servertest.Engine() {
		t.Errorf("settings broker %q, want %q", got, servertest.Engine())
	}
	if got := res.Settings["durability"]; got != want[servertest.Engine()] {
		t.Errorf("settings durability %q, want %q", got, want[servertest.Engine()])
	}
}
