package bench

import (
	"maps"
	"slices"
	"strings"
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

// TestReadSamplesWithNodeLabel: a server on PostgreSQL labels every series
// with its node, and the soak's samples of the server are read all the
// same; a series with other labels is not the one asked for.
func TestReadSamplesWithNodeLabel(t *testing.T) {
	text := `# HELP conveyor_go_goroutines Number of goroutines.
conveyor_go_goroutines{node="01J9"} 42
conveyor_process_open_fds 17
conveyor_tasks_dispatched_total{node="01J9",queue="q",type="t"} 5
`
	got, err := readSamples(strings.NewReader(text), []string{"conveyor_go_goroutines", "conveyor_process_open_fds", "conveyor_tasks_dispatched_total"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"conveyor_go_goroutines": 42, "conveyor_process_open_fds": 17}
	if !maps.Equal(got, want) {
		t.Fatalf("read %v, want %v", got, want)
	}
}
