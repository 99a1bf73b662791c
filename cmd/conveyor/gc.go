package main

import (
	"os"
	"runtime/debug"
)

// serverGCPercent is the server's garbage-collection target when GOGC is
// not set. The server keeps its task index and ready queues outside the
// Go heap, so the heap itself stays small (a few MiB) while requests
// allocate fast: at Go's default of 100 it collects tens of times a
// second, and the collector took 8-14% of the server's CPU in every
// workload's profile. At 400 it collects a quarter as often for a few
// more MiB of heap (docs/benchmarks.md has the figures).
const serverGCPercent = 400

// tuneGC applies serverGCPercent unless the operator set GOGC.
func tuneGC() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(serverGCPercent)
	}
}
