package conveyor

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestBoundText(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, in string
		max      int
		want     string
	}{
		{"short", "abc", 20, "abc"},
		{"exactly the bound", strings.Repeat("a", 20), 20, strings.Repeat("a", 20)},
		{"one over", strings.Repeat("a", 21), 20, "aaaa … [truncated]"},
		{"cut inside a rune", "aaa€€€€€€€", 20, "aaa … [truncated]"}, // € is 3 bytes: the 4th byte starts the cut rune
		{"cut after a rune", "aaaa€€€€€€€", 20, "aaaa … [truncated]"},
		{"invalid UTF-8 repaired", "a\xffb", 20, "a\uFFFDb"},
		{"repaired, then cut", strings.Repeat("\xffa", 10), 20, "\uFFFDa … [truncated]"},
	} {
		got := boundText(tc.in, tc.max)
		if got != tc.want {
			t.Errorf("%s: boundText(%q, %d) = %q, want %q", tc.name, tc.in, tc.max, got, tc.want)
		}
		if len(got) > tc.max || !utf8.ValidString(got) {
			t.Errorf("%s: %q is %d bytes or invalid UTF-8", tc.name, got, len(got))
		}
	}
}
