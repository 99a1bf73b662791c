package bench

import (
	"slices"
	"testing"
)

// The verdict reads only the samples after the warm-up taken while the
// load ran: not the warm-up's, not the drain's after the load stopped.
func TestVerdictSamples(t *testing.T) {
	var samples []SoakSample
	for at := range 12 {
		samples = append(samples, SoakSample{AtS: float64(at * 10), UnderLoad: at <= 9})
	}
	var got []float64
	for _, sm := range verdictSamples(samples, 30) {
		got = append(got, sm.AtS)
	}
	if want := []float64{30, 40, 50, 60, 70, 80, 90}; !slices.Equal(got, want) {
		t.Fatalf("verdict samples at %v s, want %v", got, want)
	}
}

// A server whose memory grows while the load runs is not flat, though it
// shrinks back once the load stops.
func TestSoakVerdictIgnoresTheDrain(t *testing.T) {
	rep := &SoakReport{WarmupS: 0}
	for i, rss := range []float64{100, 100, 100, 110, 120, 130, 140, 150, 90, 90, 90} {
		rep.Samples = append(rep.Samples, SoakSample{AtS: float64(i), RSSMB: rss, Goroutines: 10, FDs: 10, UnderLoad: i <= 7})
	}
	rep.summarize()
	if rep.Flat || rep.RSS.End != 140 || rep.RSS.AfterWarmup != 100 {
		t.Errorf("verdict flat=%v, rss %+v; want not flat, 100 after the warm-up, 140 at the load's end", rep.Flat, rep.RSS)
	}
}
