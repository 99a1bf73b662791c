package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
)

// TestJSONListIsIndentedArray: the streamed array is byte for byte what
// json.Indent makes of the whole array, and protojson's whitespace (which
// it varies on purpose) never shows through.
func TestJSONListIsIndentedArray(t *testing.T) {
	t.Parallel()
	items := []*conveyorv1.QueueInfo{{Name: "a", Pending: 3}, {Name: "b", Paused: true}}
	var got bytes.Buffer
	if err := writeJSONList(&got, items); err != nil {
		t.Fatal(err)
	}
	raws := make([]json.RawMessage, len(items))
	for i, m := range items {
		// Multiline with a stray indent: the shape must not depend on it.
		b, err := protojson.MarshalOptions{Multiline: true, Indent: "   ", EmitUnpopulated: true}.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		raws[i] = b
	}
	all, err := json.Marshal(raws)
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	if err := json.Indent(&want, all, "", "  "); err != nil {
		t.Fatal(err)
	}
	want.WriteByte('\n')
	if got.String() != want.String() {
		t.Errorf("streamed:\n%s\nwant:\n%s", got.String(), want.String())
	}
	if !strings.Contains(got.String(), "\n    \"name\": \"a\",\n") {
		t.Errorf("not indented by two spaces per level:\n%s", got.String())
	}

	got.Reset()
	if err := writeJSONList(&got, []*conveyorv1.QueueInfo{}); err != nil || got.String() != "[]\n" {
		t.Errorf("empty list: %q, %v", got.String(), err)
	}
}

func TestShowHelpers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ got, want string }{
		{firstLine("one\ntwo", 10), "one"},
		{firstLine("abcdef", 4), "abc…"},
		{orDash(""), "-"},
		{showMap(map[string]int32{"b": 2, "a": 1}), "a=1, b=2"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}
