package bolt

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	storagev1 "github.com/conveyor-dev/conveyor/gen/conveyor/storage/v1"
)

// TestWithoutFieldsDropsOnlyThem: a brief listing's records decode to the
// whole record less the fields it drops, and a damaged record is left for
// Unmarshal to refuse.
func TestWithoutFieldsDropsOnlyThem(t *testing.T) {
	spec := &storagev1.TaskSpec{Queue: "q", Type: "t", Payload: bytes.Repeat([]byte("p"), 1<<20),
		ContentType: "application/json", Metadata: map[string]string{"a": "b"}}
	st := &storagev1.TaskStatus{State: 7, Queue: "q", Priority: 4, Retried: 2, EnqueuedAt: 99,
		LastError: "boom", Result: []byte("r"), ProgressMessage: "half",
		Errors: []*storagev1.AttemptErrorRecord{{Attempt: 1, Message: "boom", At: 5}}}
	for _, c := range []struct {
		msg, empty proto.Message
		drop       []protowire.Number
		clear      func(proto.Message)
	}{
		{spec, &storagev1.TaskSpec{}, briefSpecFields, func(m proto.Message) {
			s := m.(*storagev1.TaskSpec)
			s.Payload, s.Metadata = nil, nil
		}},
		{st, &storagev1.TaskStatus{}, briefStatusFields, func(m proto.Message) {
			s := m.(*storagev1.TaskStatus)
			s.LastError, s.Result, s.ProgressMessage, s.Errors = "", nil, "", nil
		}},
	} {
		b, err := proto.Marshal(c.msg)
		if err != nil {
			t.Fatal(err)
		}
		drop := c.drop
		got := proto.Clone(c.empty)
		if err := proto.Unmarshal(withoutFields(b, drop), got); err != nil {
			t.Fatal(err)
		}
		want := proto.Clone(c.msg)
		c.clear(want)
		if !proto.Equal(got, want) {
			t.Errorf("without %v: %v, want %v", drop, got, want)
		}
		damaged := b[:len(b)-1]
		if out := withoutFields(damaged, drop); !bytes.Equal(out, damaged) {
			t.Errorf("a damaged record came back changed (%d bytes of %d)", len(out), len(damaged))
		}
	}
}
