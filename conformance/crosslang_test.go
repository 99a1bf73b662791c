package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
	"github.com/conveyor-dev/conveyor/server"
)

// crossPayloads are JSON payloads that must cross from one language's SDK
// to the other's byte for byte: unicode, escapes, integers past 2^53 and
// past 64 bits, a number no float holds, spacing kept.
var crossPayloads = [][]byte{
	[]byte(`{"text":"héllo wörld ✓ 𝄞 日本語","esc":"quote \" backslash \\ newline \n tab \t nul \u0000 line sep \u2028","emoji":"\ud83d\ude00"}`),
	[]byte(`{"big":9007199254740993,"neg":-9223372036854775808,"huge":123456789012345678901234567890,"exp":1e400,"frac":0.1000000000000000055511151231257827}`),
	[]byte(`[ 1 , 2 ,  {"a" : null} , true , false , "" ]`),
	[]byte(`"a bare string"`),
}

// sdkCommand returns the worker command of the repository's SDK name.
func sdkCommand(t *testing.T, name string) []string {
	t.Helper()
	for _, s := range SDKs("..") {
		if s.Name == name {
			cmd, err := s.Command()
			if err != nil {
				t.Fatal(err)
			}
			return cmd
		}
	}
	t.Fatalf("no SDK %q", name)
	return nil
}

// checkCrossed waits for each task to complete and checks that its stored
// payload and its result are the producer's bytes.
func checkCrossed(t *testing.T, e *realEnv, ids []string) {
	t.Helper()
	for i, id := range ids {
		ti := e.waitFor(id, "completed", inState(conveyorv1.TaskState_TASK_STATE_COMPLETED))
		if !bytes.Equal(ti.GetPayload(), crossPayloads[i]) || !bytes.Equal(ti.GetResult(), crossPayloads[i]) {
			t.Errorf("payload %d: stored %q, result %q; want both %q", i, ti.GetPayload(), ti.GetResult(), crossPayloads[i])
		}
	}
}

// TestGoProducerTypeScriptWorker: tasks the Go SDK's Client enqueues are
// worked by the TypeScript SDK's worker, payload and result bytes
// identical.
func TestGoProducerTypeScriptWorker(t *testing.T) {
	t.Parallel()
	cmd := sdkCommand(t, "ts")
	e := startReal(t, server.Config{})
	client, err := conveyor.NewClient(e.srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, p := range crossPayloads {
		info, err := client.Enqueue(context.Background(), "conformance.echo", p)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, info.ID)
	}
	Start(t, cmd, workerEnv(e.srv.URL())).WaitReady(short)
	checkCrossed(t, e, ids)
}

// TestTypeScriptProducerGoWorker: tasks the TypeScript SDK's Client
// enqueues (conformance/testdata/produce.mjs) are worked by the Go SDK's
// worker, payload and result bytes identical.
func TestTypeScriptProducerGoWorker(t *testing.T) {
	t.Parallel()
	sdkCommand(t, "ts") // fails the test when the TypeScript SDK is not built
	cmd := sdkCommand(t, "go")
	e := startReal(t, server.Config{})
	type item struct {
		Type    string `json:"type"`
		Queue   string `json:"queue"`
		Payload []byte `json:"payload"`
	}
	var items []item
	for _, p := range crossPayloads {
		items = append(items, item{Type: "conformance.echo", Queue: "default", Payload: p})
	}
	in, err := json.Marshal(items)
	if err != nil {
		t.Fatal(err)
	}
	produce := exec.Command("node", filepath.Join("testdata", "produce.mjs"))
	produce.Env = append(os.Environ(), "CONVEYOR_URL="+e.srv.URL())
	produce.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	produce.Stderr = &stderr
	out, err := produce.Output()
	if err != nil {
		t.Fatalf("the TypeScript producer: %v\n%s", err, stderr.String())
	}
	var ids []string
	if err := json.Unmarshal(out, &ids); err != nil || len(ids) != len(items) {
		t.Fatalf("the TypeScript producer printed %q (%v)", out, err)
	}
	Start(t, cmd, workerEnv(e.srv.URL())).WaitReady(short)
	checkCrossed(t, e, ids)
}
