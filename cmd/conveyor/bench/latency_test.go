package bench

import "testing"

// W4's figures, as the harness computes them: the latency from the
// Enqueue call's return to the handler's start, a handler that started
// first counted in Negative (and as 0), and the latency from the call's
// start, which is never negative.
func TestSetLatencies(t *testing.T) {
	const ms = 1_000_000
	callStart := []int64{100 * ms, 200 * ms, 300 * ms, 400 * ms}
	returned := []int64{102 * ms, 201 * ms, 305 * ms, 401 * ms}
	started := []int64{105 * ms, 209 * ms, 304 * ms, 402 * ms} // the third before its call returned
	var res Result
	if err := res.setLatencies(started, returned, callStart); err != nil {
		t.Fatal(err)
	}
	// Return→start: 3, 8, 0 (negative), 1 ms; call: 2, 1, 5, 1 ms;
	// call start→start: 5, 9, 4, 2 ms.
	if res.Negative != 1 || res.P50Ms != 1 || res.P99Ms != 8 || res.MaxMs != 8 {
		t.Errorf("latency: negative %d, p50 %v, p99 %v, max %v; want 1, 1, 8, 8", res.Negative, res.P50Ms, res.P99Ms, res.MaxMs)
	}
	if res.EnqP50Ms != 1 || res.EnqP99Ms != 5 {
		t.Errorf("enqueue call: p50 %v, p99 %v; want 1, 5", res.EnqP50Ms, res.EnqP99Ms)
	}
	if res.FromCallP50Ms != 4 || res.FromCallP99Ms != 9 || res.FromCallMaxMs != 9 {
		t.Errorf("from call start: p50 %v, p99 %v, max %v; want 4, 9, 9", res.FromCallP50Ms, res.FromCallP99Ms, res.FromCallMaxMs)
	}
	if err := res.setLatencies([]int64{0}, []int64{1}, []int64{1}); err == nil {
		t.Error("a task without a handler start was accepted")
	}
}
