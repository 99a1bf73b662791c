package sessions

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/server/internal/wire"
)

// frameSamples are frames whose counts equal what decoding builds: no
// duplicate map keys, one frame field each. Strings hold JSON's
// structural characters, which must not be counted.
func frameSamples() []*conveyorv1.WorkerMessage {
	odd := []string{`a,b`, `]`, `}`, `"`, `\`, `\"],[`, "é,{", ""}
	return []*conveyorv1.WorkerMessage{
		{},
		{Frame: &conveyorv1.WorkerMessage_Hello{Hello: &conveyorv1.Hello{
			Queues: map[string]int32{"a": 1, "b,c": 2, `"}`: 3}, Concurrency: 4,
			Labels: map[string]string{"k": `v,"]`}, SdkVersion: "v1", BatchTypes: odd}}},
		{Frame: &conveyorv1.WorkerMessage_Heartbeat{Heartbeat: &conveyorv1.Heartbeat{ActiveTaskIds: odd, ActiveAttemptIds: odd[:3]}}},
		{Frame: &conveyorv1.WorkerMessage_Heartbeat{Heartbeat: &conveyorv1.Heartbeat{}}},
		{Frame: &conveyorv1.WorkerMessage_BatchResult{BatchResult: &conveyorv1.BatchResult{Results: []*conveyorv1.Result{
			{TaskId: "t1", ErrorMsg: `x, {"y": [1,2]}`, Result: []byte("[,]")}, {}, {TaskId: "t3", AttemptId: "a"}}}}},
		{Frame: &conveyorv1.WorkerMessage_Result{Result: &conveyorv1.Result{TaskId: "t", ErrorMsg: "a,b"}}},
		{Frame: &conveyorv1.WorkerMessage_Progress{Progress: &conveyorv1.Progress{TaskId: "t", Message: "[1,2]"}}},
		{Frame: &conveyorv1.WorkerMessage_Credit{Credit: &conveyorv1.Credit{N: 3}}},
	}
}

// decodedCounts are the counts of what decoding built.
func decodedCounts(m *conveyorv1.WorkerMessage) frameCounts {
	h, hb := m.GetHello(), m.GetHeartbeat()
	return frameCounts{
		heartbeatIDs: len(hb.GetActiveTaskIds()) + len(hb.GetActiveAttemptIds()),
		results:      len(m.GetBatchResult().GetResults()),
		queues:       len(h.GetQueues()), labels: len(h.GetLabels()), batchTypes: len(h.GetBatchTypes()),
	}
}

// atLeast reports whether every count of c is at least d's.
func (c frameCounts) atLeast(d frameCounts) bool {
	return c.heartbeatIDs >= d.heartbeatIDs && c.results >= d.results &&
		c.queues >= d.queues && c.labels >= d.labels && c.batchTypes >= d.batchTypes
}

// TestFrameCountsMatchDecoding: on the encoded bytes, in binary and in
// JSON, each count is what decoding the frame builds.
func TestFrameCountsMatchDecoding(t *testing.T) {
	for _, m := range frameSamples() {
		want := decodedCounts(m)
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := protoFrameCounts(b); got != want {
			t.Errorf("binary %v: counts %+v, want %+v", m, got, want)
		}
		for _, opts := range []protojson.MarshalOptions{{}, {UseProtoNames: true}, {Multiline: true}} {
			j, err := opts.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			got, err := jsonFrameCounts(j)
			if err != nil || got != want {
				t.Errorf("JSON %s: counts %+v (%v), want %+v", j, got, err, want)
			}
		}
	}
}

// TestFrameCountsOfOddFrames: counts never fall short of what decoding
// would build, whatever the encoder did: a field given twice (decoding
// merges both), a known field of another wire type, bytes that stop being
// well formed (decoding builds what comes before the fault), a name in
// both its JSON and its proto spelling, or in another case.
func TestFrameCountsOfOddFrames(t *testing.T) {
	hb := func(ids ...string) []byte {
		b, _ := proto.Marshal(&conveyorv1.WorkerMessage{Frame: &conveyorv1.WorkerMessage_Heartbeat{
			Heartbeat: &conveyorv1.Heartbeat{ActiveTaskIds: ids}}})
		return b
	}
	for _, c := range []struct {
		name string
		b    []byte
		want int
	}{
		{"two heartbeat fields", append(hb("a", "b"), hb("c")...), 3},
		{"a truncated field after it", append(hb("a", "b", "c"), 0x22, 0x05, 0x0a), 3},
		{"a truncated id in a field after it", append(hb("a", "b"), 0x22, 0x05, 0x0a, 0x01, 0x41, 0x0a, 0x05), 3},
		{"a truncated frame (decoding builds none)", hb("a", "b", "c")[:9], 0},
		{"an id field of the varint type", append(hb("a"), 0x22, 0x02, 0x08, 0x01), 1},
	} {
		if got, _ := protoFrameCounts(c.b); got.heartbeatIDs != c.want {
			t.Errorf("binary, %s: %d ids, want %d", c.name, got.heartbeatIDs, c.want)
		}
	}
	for _, c := range []struct {
		json string
		want frameCounts
	}{
		{`{"heartbeat":{"activeTaskIds":["a","b"],"active_task_ids":["c"],"activeAttemptIds":["d"],"active_attempt_ids":[]}}`,
			frameCounts{heartbeatIDs: 4}},
		{`{"HEARTBEAT":{"ActiveTaskIDs":["a", "b"]}}`, frameCounts{heartbeatIDs: 2}},
		{`{"heartbeat":{"activeTaskIds":["a"]},"heartbeat":{"activeTaskIds":["b","c"]}}`, frameCounts{heartbeatIDs: 3}},
		{`{"batchResult":{"results":[{},{},{}]},"batch_result":{"results":[{}]}}`, frameCounts{results: 4}},
		{`{"hello":{"queues":{"a":1,"b":2},"labels":{},"batchTypes":["x"],"batch_types":["y"]}}`,
			frameCounts{queues: 2, batchTypes: 2}},
		{`{"heartbeat":{"activeTaskIds":null}}`, frameCounts{}},
		{`{"heartbeat":"nonsense","hello":{"queues":{"a":1}}}`, frameCounts{queues: 1}},
	} {
		got, err := jsonFrameCounts([]byte(c.json))
		if err != nil || got != c.want {
			t.Errorf("JSON %s: counts %+v (%v), want %+v", c.json, got, err, c.want)
		}
	}
	if _, err := jsonFrameCounts([]byte(`{"heartbeat":{"activeTaskIds":["a","b"` + strings.Repeat(`,"x"`, 10) + `,]}}`)); err == nil ||
		!strings.Contains(err.Error(), "invalid character") {
		t.Errorf("JSON with a syntax error: %v, want it refused before protojson decodes the ids", err)
	}
}

// TestFrameCountsCheck: each bound is refused one past it, in words that
// name it, and allowed at it.
func TestFrameCountsCheck(t *testing.T) {
	for _, c := range []struct {
		at, past frameCounts
		want     string
	}{
		{frameCounts{heartbeatIDs: wire.MaxHeartbeatIDs}, frameCounts{heartbeatIDs: wire.MaxHeartbeatIDs + 1}, "heartbeat lists 100001 ids; the limit is 100000"},
		{frameCounts{results: wire.MaxGroupSize}, frameCounts{results: wire.MaxGroupSize + 1}, "batch_result lists 10001 results; the limit is 10000"},
		{frameCounts{queues: wire.MaxHelloQueues}, frameCounts{queues: wire.MaxHelloQueues + 1}, "hello.queues lists 1001 queues; the limit is 1000"},
		{frameCounts{labels: wire.MaxHelloLabels}, frameCounts{labels: wire.MaxHelloLabels + 1}, "hello.labels has 65 entries; the limit is 64"},
		{frameCounts{batchTypes: wire.MaxHelloBatchTypes}, frameCounts{batchTypes: wire.MaxHelloBatchTypes + 1}, "hello.batch_types lists 1001 types; the limit is 1000"},
	} {
		if err := c.at.check(); err != nil {
			t.Errorf("%+v: %v, want it allowed", c.at, err)
		}
		if err := c.past.check(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.past, err, c.want)
		}
	}
}

// FuzzFrameCounts: for any bytes decoding accepts as a WorkerMessage, in
// binary or in JSON, the counts on the encoded bytes are at least what
// decoding built, so a frame the counts let through builds no more than
// the bounds allow.
//
//	go test ./server -run '^$' -fuzz FuzzFrameCounts -fuzztime 30s
func FuzzFrameCounts(f *testing.F) {
	for _, m := range frameSamples() {
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		j, err := protojson.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(j)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var m conveyorv1.WorkerMessage
		if proto.Unmarshal(b, &m) == nil {
			if got, _ := protoFrameCounts(b); !got.atLeast(decodedCounts(&m)) {
				t.Fatalf("binary: counts %+v, decoding built %+v", got, decodedCounts(&m))
			}
		}
		m.Reset()
		if (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(b, &m) == nil {
			got, err := jsonFrameCounts(b)
			if err != nil || !got.atLeast(decodedCounts(&m)) {
				t.Fatalf("JSON: counts %+v (%v), decoding built %+v", got, err, decodedCounts(&m))
			}
		}
	})
}
