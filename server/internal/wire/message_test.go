package wire

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// TestBoundMessage: a long message keeps its start and its end, cut at
// UTF-8 boundaries, and says how much went; a short one is unchanged.
func TestBoundMessage(t *testing.T) {
	t.Parallel()
	short := `queue "a b" is invalid`
	if got := BoundMessage(short); got != short {
		t.Errorf("BoundMessage(%q) = %q", short, got)
	}
	for _, filler := range []string{"a", "é", "日本"} {
		msg := `task id "` + strings.Repeat(filler, 5000) + `": not found`
		got := BoundMessage(msg)
		if len(got) > MaxErrorTextBytes || !utf8.ValidString(got) ||
			!strings.HasPrefix(got, `task id "`) || !strings.HasSuffix(got, `": not found`) || !strings.Contains(got, " bytes cut] … ") {
			t.Errorf("filler %q: %d bytes, %q", filler, len(got), got)
		}
	}
}
