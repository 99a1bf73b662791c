package main

import (
	"os"
	"runtime/debug"
	"testing"
)

// TestTuneGC: the server raises the GC target unless GOGC says otherwise.
func TestTuneGC(t *testing.T) {
	old, had := os.LookupEnv("GOGC")
	prev := debug.SetGCPercent(100)
	t.Cleanup(func() {
		if had {
			_ = os.Setenv("GOGC", old)
		} else {
			_ = os.Unsetenv("GOGC")
		}
		debug.SetGCPercent(prev)
	})

	_ = os.Unsetenv("GOGC")
	debug.SetGCPercent(100)
	tuneGC()
	if got := debug.SetGCPercent(100); got != serverGCPercent {
		t.Errorf("without GOGC: GC percent %d, want %d", got, serverGCPercent)
	}

	_ = os.Setenv("GOGC", "150")
	tuneGC()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("with GOGC set: GC percent %d, want it left alone (100)", got)
	}
}
