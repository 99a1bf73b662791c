package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// -update rewrites the golden files under testdata/ from the output.
var update = flag.Bool("update", false, "rewrite testdata/*.golden")

var (
	ulidPattern = regexp.MustCompile(`\b[0-9A-HJKMNP-TV-Z]{26}\b`)
	timePattern = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z`)
	// A relative time (relTime) with the padding after it: the cell and its
	// padding keep their width, as the column does (its header is wider).
	relPattern = regexp.MustCompile(`\b(in \d+[mhd]|in <1m|\d+[mhd] ago|just now)( *)`)
)

// normalize replaces what differs between runs: ULIDs become ID0…01, ID0…02
// in order of first appearance, and times a fixed one of the same width
// (for whole seconds), and relative times "in ~" or "~ ago" padded to the
// width they had, so tables stay aligned.
func normalize(out string) string {
	ids := map[string]string{}
	out = ulidPattern.ReplaceAllStringFunc(out, func(id string) string {
		if _, ok := ids[id]; !ok {
			ids[id] = fmt.Sprintf("ID%024d", len(ids)+1)
		}
		return ids[id]
	})
	lines := strings.SplitAfter(out, "\n")
	for i, line := range lines {
		rel := relPattern.ReplaceAllStringFunc(line, func(rel string) string {
			r := "~ ago"
			if strings.HasPrefix(rel, "in ") {
				r = "in ~"
			}
			return r + strings.Repeat(" ", max(0, len(rel)-len(r)))
		})
		if rel != line { // a last column has no padding to keep
			nl := strings.HasSuffix(rel, "\n")
			rel = strings.TrimRight(rel, " \n")
			if nl {
				rel += "\n"
			}
		}
		lines[i] = rel
	}
	out = strings.Join(lines, "")
	return timePattern.ReplaceAllString(out, "2000-01-01T00:00:00Z")
}

// golden compares the normalized output with testdata/name.golden.
func golden(t *testing.T, name, out string) {
	t.Helper()
	out = normalize(out)
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(out), 0o600); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run the test with -update to create it)", err)
	}
	if out != string(want) {
		t.Errorf("%s: output differs from the golden file (-update rewrites it)\n--- got\n%s--- want\n%s", path, out, want)
	}
}
