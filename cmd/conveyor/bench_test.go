package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/conveyor-dev/conveyor/cmd/conveyor/bench"
	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/gen/conveyor/v1/conveyorv1connect"
	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

// TestBenchSoak runs a short SOAK against a real server process: every
// acknowledged task completes, each kind of the mix happens, workers
// reconnect, and the server is sampled throughout.
func TestBenchSoak(t *testing.T) {
	bin := conveyorBinary(t)
	res := bench.Run(context.Background(), bench.Config{
		Workload: "SOAK", Binary: bin, Duration: 6 * time.Second, Rate: 300, Producers: 4,
		Concurrency: 8, SampleEvery: 500 * time.Millisecond, Timeout: 3 * time.Minute,
	})
	if !res.OK {
		t.Fatalf("soak failed: %s", res.Err)
	}
	rep := res.Soak
	if rep == nil {
		t.Fatal("no soak report")
	}
	if rep.Enqueued != int64(res.N) || rep.Completed != rep.Enqueued {
		t.Errorf("enqueued %d, completed %d; want both %d", rep.Enqueued, rep.Completed, res.N)
	}
	if want := int64(res.N / 10); rep.Retried != want || rep.Scheduled != want {
		t.Errorf("retried %d, scheduled %d; want %d each (a tenth of the mix)", rep.Retried, rep.Scheduled, want)
	}
	if rep.CronFires == 0 || rep.Reconnects == 0 {
		t.Errorf("cron fires %d, reconnects %d; want some of each", rep.CronFires, rep.Reconnects)
	}
	if len(rep.Samples) < 6 {
		t.Fatalf("%d samples, want one every 500 ms of the run", len(rep.Samples))
	}
	for _, sm := range rep.Samples {
		if sm.RSSMB <= 0 || sm.Goroutines <= 0 || sm.FDs <= 0 {
			t.Fatalf("sample %+v misses a figure", sm)
		}
	}
	if rep.Goroutines.AfterWarmup == 0 {
		t.Errorf("no verdict: %+v", rep)
	}
}

// TestBenchPrefillOther runs W1 against a server that first got other
// pending tasks on another queue.
func TestBenchPrefillOther(t *testing.T) {
	bin := conveyorBinary(t)
	res := bench.Run(context.Background(), bench.Config{Workload: "W1", Binary: bin, N: 2000, PrefillOther: 3000})
	if !res.OK {
		t.Fatalf("W1 with a prefill failed: %s", res.Err)
	}
	if res.PrefillOtherS <= 0 || res.PrefillRSSAnonMB <= 0 || res.Settings["prefill_other"] == "" {
		t.Errorf("the prefill is not reported: %+v", res)
	}
	for _, bad := range []bench.Config{
		{Workload: "MEM", Binary: bin, PrefillOther: 10},
		{Workload: "SOAK", Binary: bin, Shape: "keys"},
	} {
		if res := bench.Run(context.Background(), bad); res.OK || res.Err == "" {
			t.Errorf("%+v was accepted", bad)
		}
	}
}

// TestBenchHTTP1 runs W2 the way curl calls the server, one Connect JSON
// call per task over HTTP/1.1, and refuses the combination gRPC cannot
// carry.
func TestBenchHTTP1(t *testing.T) {
	bin := conveyorBinary(t)
	res := bench.Run(context.Background(), bench.Config{
		Workload: "W2", Binary: bin, N: 500, Protocol: conveyor.ProtocolConnect, Unbatched: true, HTTP1: true,
	})
	if !res.OK || res.TPS <= 0 {
		t.Fatalf("W2 over HTTP/1.1 failed: %s", res.Err)
	}
	if res.Settings["transport"] != "HTTP/1.1 keep-alive" {
		t.Errorf("settings %v do not name the transport", res.Settings)
	}
	if !strings.HasPrefix(res.Settings["enqueue_batching"], "off") {
		t.Errorf("settings %v do not say the SDK's enqueue batching was off", res.Settings)
	}
	res = bench.Run(context.Background(), bench.Config{Workload: "W2", Binary: bin, HTTP1: true})
	if res.OK || !strings.Contains(res.Err, "--protocol connect") {
		t.Errorf("HTTP/1.1 with gRPC: ok %v, err %q; want a refusal naming --protocol connect", res.OK, res.Err)
	}
}

// TestBenchCanceledIsNoResult runs the enqueue workloads with a context
// that has already ended: no task is enqueued, so no run may report
// success (and a rate for tasks it never sent).
func TestBenchCanceledIsNoResult(t *testing.T) {
	bin := conveyorBinary(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, w := range []string{"W1", "W2", "MEM"} {
		res := bench.Run(ctx, bench.Config{Workload: w, Binary: bin, N: 2000})
		if res.OK || !strings.Contains(res.Err, "canceled") {
			t.Errorf("%s with a canceled context: ok %v, err %q, %.0f tasks/s; want a failure naming the cancel",
				w, res.OK, res.Err, res.TPS)
		}
	}
}

// TestBenchAddrRefusesAHeldQueue runs W1 against a running server, which
// leaves its tasks pending, then the workloads that drain the bench queue:
// they would drain W1's tasks too and count only their own, so they refuse
// and say what the queue holds.
func TestBenchAddrRefusesAHeldQueue(t *testing.T) {
	child := startChild(t, t.TempDir())
	res := bench.Run(context.Background(), bench.Config{Workload: "W1", Addr: child.url, N: 3000})
	if !res.OK {
		t.Fatalf("W1 against --addr failed: %s", res.Err)
	}
	for _, w := range []string{"W3", "W4", "SOAK"} {
		res := bench.Run(context.Background(), bench.Config{Workload: w, Addr: child.url, N: 1000,
			Duration: 6 * time.Second, SampleEvery: 500 * time.Millisecond})
		if res.OK || !strings.Contains(res.Err, "3000 pending") {
			t.Errorf("%s after W1 on one server: ok %v, err %q, %.0f tasks/s; want a refusal naming the 3000 pending",
				w, res.OK, res.Err, res.TPS)
		}
	}
}

// TestBenchServerExitsAtStart makes the server the bench starts refuse its
// configuration: the run fails at once with the server's own message,
// instead of waiting for a startup line that cannot come.
func TestBenchServerExitsAtStart(t *testing.T) {
	// The bench gives its server none of its own CONVEYOR_* settings, so
	// the refused one is set by a wrapper around the real binary.
	bin := filepath.Join(t.TempDir(), "conveyor-postgres")
	script := "#!/bin/sh\nCONVEYOR_BROKER=postgres exec " + conveyorBinary(t) + " \"$@\"\n"
	if err := os.WriteFile(bin, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	res := bench.Run(context.Background(), bench.Config{Workload: "W1", Binary: bin, N: 100})
	if res.OK || !strings.Contains(res.Err, "exited before serving") || !strings.Contains(res.Err, "postgres") {
		t.Errorf("a server that exits at start: ok %v, err %q; want a failure with its exit and its message", res.OK, res.Err)
	}
}

// TestBenchSoakTooShortForAVerdict asks for a SOAK whose sampling leaves
// too few samples after the warm-up to judge flatness: it is refused
// before it runs, rather than reporting "not flat" about nothing.
func TestBenchSoakTooShortForAVerdict(t *testing.T) {
	bin := conveyorBinary(t)
	res := bench.Run(context.Background(), bench.Config{Workload: "SOAK", Binary: bin, Duration: time.Minute, Rate: 50})
	if res.OK || !strings.Contains(res.Err, "--sample-every 10s") {
		t.Errorf("a 1-minute SOAK sampled every 10 s: ok %v, flat %v, err %q; want a refusal naming the sampling",
			res.OK, res.Soak != nil && res.Soak.Flat, res.Err)
	}
	if res.Workload != "SOAK" {
		t.Errorf("the refused run's line names workload %q, want SOAK", res.Workload)
	}
}

// TestBenchAddrPrefillOtherTopsUp runs W1 with --prefill-other twice
// against one running server: the second run finds the first one's tasks
// and tops the other queue up to N, so both measure against the depth
// they report, not N and then 2N.
func TestBenchAddrPrefillOtherTopsUp(t *testing.T) {
	child := startChild(t, t.TempDir())
	var last bench.Result
	for range 2 {
		last = bench.Run(context.Background(), bench.Config{Workload: "W1", Addr: child.url, N: 500, PrefillOther: 1000})
		if !last.OK {
			t.Fatalf("W1 with a prefill against --addr failed: %s", last.Err)
		}
	}
	admin := conveyorv1connect.NewAdminServiceClient(servertest.HTTPClient(), child.url, connect.WithGRPC())
	res, err := admin.ListQueues(context.Background(), connect.NewRequest(&conveyorv1.ListQueuesRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range res.Msg.GetQueues() {
		if q.GetName() == "bench-other" && q.GetPending() != 1000 {
			t.Errorf("bench-other holds %d pending after two runs with --prefill-other 1000, want 1000", q.GetPending())
		}
	}
	if !strings.Contains(last.Settings["prefill_other"], "1000 of them there before the run") {
		t.Errorf("second run's settings %q do not say the tasks were there before it", last.Settings["prefill_other"])
	}
}
