// Package bench runs the side-by-side workloads of the shared benchmark
// harness (W1 enqueue-bulk, W2 enqueue-unary, W3 drain, W4 latency) with the
// Go SDK against a real `conveyor server` process, plus MEM, which measures
// the memory a million pending tasks take and how long the server takes to
// reopen them. Each run prints one JSON line with the harness's field names,
// so Conveyor's figures and the peers' can be read together.
package bench
