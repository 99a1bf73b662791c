//go:build race

package server_test

// raceEnabled reports whether the tests run under the race detector, whose
// instrumentation changes what some code allocates (see
// TestRefusedHeartbeatsCostLittle).
const raceEnabled = true
