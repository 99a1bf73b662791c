// Package bench runs the side-by-side workloads of the shared benchmark
// harness (W1 enqueue-bulk, W2 enqueue-unary, W3 drain, W4 latency) with the
// Go SDK against a real `conveyor server` process, plus MEM, which measures
// the memory a million pending tasks take and how long the server takes to
// reopen them. Each run prints one JSON line with the harness's field names,
// so Conveyor's figures and the peers' can be read together.
//
// With --nodes N, a run starts N servers on one PostgreSQL schema and
// spreads its producers and workers over them (--cross: producers on the
// first node, workers on the others); --kill-leader-after kills the
// leader mid-run and records the failover. On PostgreSQL, the line lists
// each server's CPU and PostgreSQL's: every process of the machine named
// postgres, so the whole cluster, other databases' work included.
package bench
