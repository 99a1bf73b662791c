package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/conveyor-dev/conveyor/cmd/conveyor/bench"
	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
)

type benchCmd struct {
	Workload     string        `required:"" enum:"W1,W2,W3,W4,MEM,SOAK,w1,w2,w3,w4,mem,soak" help:"Workload: W1 enqueue-bulk, W2 enqueue-unary, W3 drain, W4 latency, MEM one million pending tasks, SOAK a long mixed run sampling the server."`
	N            int           `help:"Task count (default: the workload's)."`
	Runs         int           `default:"1" help:"How many runs; each prints one JSON line."`
	Addr         string        `env:"CONVEYOR_BENCH_ADDR" help:"Use this running server instead of starting a fresh one per run."`
	Token        string        `env:"CONVEYOR_TOKEN" help:"Bearer token for --addr."`
	Callers      int           `default:"2" help:"Concurrent EnqueueBatch calls (W1 and prefills)."`
	Producers    int           `default:"32" help:"Concurrent producers (W2, W4)."`
	Concurrency  int           `default:"64" help:"Worker concurrency (W3, W4)."`
	Workers      int           `default:"1" help:"Workers (sessions) of --concurrency each on each server (W3, W4)."`
	Rate         int           `help:"Enqueue rate of W4 (default 2000) and SOAK (default 500), tasks/s."`
	Duration     time.Duration `help:"How long W4 (default 10s) and SOAK (default 30m) enqueue."`
	SampleEvery  time.Duration `name:"sample-every" help:"How often SOAK samples the server (default 10s)."`
	PrefillOther int           `name:"prefill-other" help:"Put this many pending tasks on another queue (no worker serves it) before W1-W4 start, to measure against a deep store."`
	Protocol     string        `default:"grpc" enum:"grpc,connect" help:"SDK wire format."`
	Unbatched    bool          `help:"One RPC per Enqueue call (the SDK's enqueue batching off), as every non-Go client does (W2, W4)."`
	HTTP1        bool          `name:"http1" help:"Producers call over HTTP/1.1 keep-alive connections, as curl does (needs --protocol connect; workers keep HTTP/2)."`
	Push         bool          `help:"W3 and W4: the tasks are worked by a push endpoint (the Go SDK's PushHandler on loopback, of --concurrency) instead of a session."`
	PushSecret   string        `name:"push-secret" env:"CONVEYOR_PUSH_SECRET" help:"Secret of --push with --addr: one of that server's (a fresh server gets a made-up one)."`
	Shape        string        `enum:",keys,groups,blocked,typed,once" default:"" help:"Task shape: keys (W3: concurrency keys, limit 1), groups (W3: drained as batches; MEM: held AGGREGATING), blocked (MEM: all BLOCKED on one parent), typed (W3: four types, four workers of one type each), once (W3, W4: every task at most once). Default: plain tasks."`
	Keys         int           `default:"1000" help:"Concurrency keys of --shape keys."`
	GroupSize    int           `name:"group-size" default:"100" help:"Members per group of --shape groups."`
	CPUProfile   string        `name:"cpuprofile" help:"Write a CPU profile of the bench process (the SDK side) to this file."`
	DatabaseURL  string        `name:"database-url" env:"CONVEYOR_BENCH_DATABASE_URL" help:"Run each fresh server on PostgreSQL, in a schema of its own in this database (dropped after the run)."`
	Nodes        int           `default:"1" help:"Fresh servers per run, all on one PostgreSQL schema (more than 1 needs --database-url); producers and workers are spread over them in turn, --workers per node."`
	Cross        bool          `help:"W4 with --nodes 2 or more: producers call the first node only, workers connect to the other nodes only."`
	NodeLiveness time.Duration `name:"node-liveness" help:"The nodes' --node-liveness with --nodes 2 or more (default: the server's, 15s; 5s with --kill-leader-after)."`
	KillLeader   time.Duration `name:"kill-leader-after" help:"W3 or SOAK with --nodes 2 or more: SIGKILL the leader node this long after the workers start and record the failover (the nodes run with --node-liveness 5s)."`
}

func (c *benchCmd) Run() error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	proto := conveyor.ProtocolGRPC
	if c.Protocol == "connect" {
		proto = conveyor.ProtocolConnect
	}
	if c.CPUProfile != "" {
		f, err := os.Create(c.CPUProfile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer func() {
			pprof.StopCPUProfile()
			_ = f.Close()
		}()
	}
	failed := 0
	for run := 1; run <= c.Runs; run++ {
		res := bench.Run(ctx, bench.Config{
			Workload: strings.ToUpper(c.Workload), N: c.N, Addr: c.Addr, Token: c.Token,
			Callers: c.Callers, Producers: c.Producers, Concurrency: c.Concurrency, Workers: c.Workers,
			Rate: c.Rate, Duration: c.Duration, Protocol: proto, Unbatched: c.Unbatched, HTTP1: c.HTTP1, Run: run,
			Shape: c.Shape, Keys: c.Keys, GroupSize: c.GroupSize, Push: c.Push, PushSecret: c.PushSecret,
			PrefillOther: c.PrefillOther, SampleEvery: c.SampleEvery, DatabaseURL: c.DatabaseURL,
			Nodes: c.Nodes, Cross: c.Cross, KillLeaderAfter: c.KillLeader, NodeLiveness: c.NodeLiveness,
		})
		if err := bench.WriteJSON(os.Stdout, res); err != nil {
			return err
		}
		if !res.OK {
			failed++
		}
		if ctx.Err() != nil {
			// Interrupted: the runs left would each start a server only
			// to fail at once.
			return fmt.Errorf("interrupted after run %d of %d", run, c.Runs)
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d runs failed", failed, c.Runs)
	}
	return nil
}
