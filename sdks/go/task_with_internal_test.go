package conveyor

import (
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
)

// TestTaskWithCopies: With copies every field of the request (a field
// added to EnqueueRequest must be added to With), shares the payload, and
// leaves the original untouched.
func TestTaskWithCopies(t *testing.T) {
	t.Parallel()
	full := &conveyorv1.EnqueueRequest{TaskId: "01J00000000000000000000001", Queue: "q", Type: "typ",
		Payload: []byte("pay"), ContentType: "text/plain", Metadata: map[string]string{"k": "v"},
		Options: &conveyorv1.TaskOptions{MaxRetry: 3, Timeout: durationpb.New(time.Second)}}
	fields := full.ProtoReflect().Descriptor().Fields()
	for i := range fields.Len() {
		if !full.ProtoReflect().Has(fields.Get(i)) {
			t.Fatalf("the fixture leaves %s unset", fields.Get(i).Name())
		}
	}
	orig := &Task{req: full}
	before := proto.CloneOf(full)
	cp := orig.With(MetadataKV("added", "1"), MaxRetry(5))
	if !proto.Equal(orig.req, before) {
		t.Fatalf("With changed the original: %v", orig.req)
	}
	want := proto.CloneOf(before)
	want.Metadata["added"] = "1"
	want.Options.MaxRetry = 5
	if !proto.Equal(cp.req, want) {
		t.Fatalf("With = %v, want %v", cp.req, want)
	}
	if &cp.req.Payload[0] != &orig.req.Payload[0] {
		t.Error("With copied the payload")
	}
	if got := (&Task{req: &conveyorv1.EnqueueRequest{Type: "t"}}).With(); got.req.Options != nil || got.req.Metadata != nil {
		t.Errorf("With on a bare task = %v, want no options or metadata", got.req)
	}
	if bad := orig.With(Priority(1 << 40)); bad.err == nil || orig.err != nil {
		t.Errorf("an option's programmer error: copy %v, original %v; want it on the copy only", bad.err, orig.err)
	}
}
