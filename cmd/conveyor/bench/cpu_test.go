package bench

import "testing"

func TestParseCPULine(t *testing.T) {
	busy, all, steal, ok := parseCPULine("cpu  100 2 30 500 7 1 4 60 0 0")
	if !ok || busy != 197 || all != 704 || steal != 60 {
		t.Fatalf("busy %d all %d steal %d ok %v, want 197 704 60 true", busy, all, steal, ok)
	}
	for _, bad := range []string{"", "intr 1 2 3 4 5 6 7 8", "cpu 1 2 3 4 5 6 7"} {
		if _, _, _, ok := parseCPULine(bad); ok {
			t.Errorf("%q parsed", bad)
		}
	}
}
