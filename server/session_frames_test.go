package server_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/gen/conveyor/v1/conveyorv1connect"
	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

// ids returns n distinct ids of a task id's length (26 bytes).
func ids(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("01KA%022d", i)
	}
	return out
}

func heartbeatOf(ids []string) *conveyorv1.WorkerMessage {
	return &conveyorv1.WorkerMessage{Frame: &conveyorv1.WorkerMessage_Heartbeat{Heartbeat: &conveyorv1.Heartbeat{ActiveTaskIds: ids}}}
}

// ended waits for the session's stream to end and returns why.
func (w *rawWorker) ended(timeout time.Duration) error {
	w.t.Helper()
	select {
	case err := <-w.end:
		return err
	case <-time.After(timeout):
		w.t.Fatalf("the stream did not end within %s", timeout)
	}
	return nil
}

// TestFramesOverACountBoundEndTheSession: in every wire format, a frame
// listing more entries than a bound allows ends the session with
// invalid_argument naming the bound, and one at the bound is taken.
func TestFramesOverACountBoundEndTheSession(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	hello := &conveyorv1.Hello{Queues: map[string]int32{"a": 1}, Concurrency: 1}
	results := func(n int) *conveyorv1.WorkerMessage {
		rs := make([]*conveyorv1.Result, n)
		for i := range rs {
			rs[i] = &conveyorv1.Result{TaskId: "t"}
		}
		return &conveyorv1.WorkerMessage{Frame: &conveyorv1.WorkerMessage_BatchResult{BatchResult: &conveyorv1.BatchResult{Results: rs}}}
	}
	for _, p := range servertest.Protocols {
		t.Run(string(p), func(t *testing.T) {
			t.Parallel()
			w, _, err := openSession(t, s, p, hello)
			if err != nil {
				t.Fatal(err)
			}
			w.send(heartbeatOf(ids(server.MaxHeartbeatIDs)))
			w.send(results(server.MaxGroupSize))
			w.send(heartbeatOf(ids(server.MaxHeartbeatIDs + 1)))
			if err := w.ended(30 * time.Second); connect.CodeOf(err) != connect.CodeInvalidArgument ||
				!strings.Contains(err.Error(), "heartbeat lists 100001 ids; the limit is 100000") {
				t.Errorf("a heartbeat of %d ids: %v, want invalid_argument naming the limit", server.MaxHeartbeatIDs+1, err)
			}

			w, _, err = openSession(t, s, p, hello)
			if err != nil {
				t.Fatal(err)
			}
			w.send(results(server.MaxGroupSize + 1))
			if err := w.ended(30 * time.Second); connect.CodeOf(err) != connect.CodeInvalidArgument ||
				!strings.Contains(err.Error(), "batch_result lists 10001 results; the limit is 10000") {
				t.Errorf("a batch result of %d results: %v, want invalid_argument naming the limit", server.MaxGroupSize+1, err)
			}

			queues := map[string]int32{}
			for i := range server.MaxHelloQueues + 1 {
				queues[fmt.Sprint("q", i)] = 1
			}
			_, _, err = openSession(t, s, p, &conveyorv1.Hello{Queues: queues, Concurrency: 1})
			if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "hello.queues lists 1001 queues; the limit is 1000") {
				t.Errorf("a hello of %d queues: %v, want invalid_argument naming the limit", server.MaxHelloQueues+1, err)
			}
		})
	}
}

// TestMillionIDHeartbeatIsRefused: a Heartbeat of a million ids (28 MB,
// within the frame's byte bound) ends the session with invalid_argument
// naming the count and the limit.
func TestMillionIDHeartbeatIsRefused(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	w, _, err := openSession(t, s, servertest.GRPC, &conveyorv1.Hello{Queues: map[string]int32{"a": 1}, Concurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	w.send(heartbeatOf(ids(1_000_000)))
	if err := w.ended(60 * time.Second); connect.CodeOf(err) != connect.CodeInvalidArgument ||
		!strings.Contains(err.Error(), "heartbeat lists 1000000 ids; the limit is 100000") {
		t.Fatalf("a heartbeat of a million ids: %v, want invalid_argument naming the limit", err)
	}
}

// grpcFrame is m as one gRPC length-prefixed message.
func grpcFrame(t testing.TB, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]byte, 5, 5+len(b))
	binary.BigEndian.PutUint32(out[1:5], uint32(len(b)))
	return append(out, b...)
}

// sendRawSession opens a gRPC session stream, writes the given frames,
// already encoded, and returns the status it ends with. It encodes
// nothing itself, so what the process allocates meanwhile is the server's.
func sendRawSession(t testing.TB, hc *http.Client, base string, frames ...[]byte) (code, message string) {
	t.Helper()
	body, bodyW := io.Pipe()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, base+"/"+conveyorv1connect.WorkerServiceName+"/Session", body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/grpc")
	req.Header.Set("Te", "trailers")
	go func() {
		for _, f := range frames {
			if _, err := bodyW.Write(f); err != nil {
				return
			}
		}
	}()
	defer func() { _ = bodyW.Close() }()
	res, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = res.Body.Close() }()
	if _, err := io.Copy(io.Discard, res.Body); err != nil {
		t.Fatal(err)
	}
	message, _ = url.PathUnescape(res.Trailer.Get("Grpc-Message"))
	return res.Trailer.Get("Grpc-Status"), message
}

// TestRefusedHeartbeatsCostLittle measures what a refused Heartbeat of a
// million ids (28 MB, within the 32 MiB frame bound) costs the server:
// the frame is read whole, but its ids are counted on the encoded bytes
// and never decoded. Decoding them took 111 MiB and a million allocations
// a frame (180 MiB a frame in all with the read; 249 MiB under the race
// detector); now a frame costs its read and a few hundred allocations
// (64 MiB; 135 MiB under the race detector), and nothing is kept. The
// bounds sit far from both sides.
func TestRefusedHeartbeatsCostLittle(t *testing.T) {
	// Not parallel: the process's allocation counters must be this test's.
	const frames = 30
	s := servertest.Start(t, server.Config{})
	hc := servertest.HTTPClient()
	defer hc.CloseIdleConnections()
	hello := grpcFrame(t, &conveyorv1.WorkerMessage{Frame: &conveyorv1.WorkerMessage_Hello{
		Hello: &conveyorv1.Hello{Queues: map[string]int32{"a": 1}, Concurrency: 1}}})
	hb := grpcFrame(t, heartbeatOf(ids(1_000_000)))
	refuse := func() {
		code, msg := sendRawSession(t, hc, s.URL(), hello, hb)
		if code != "3" || !strings.Contains(msg, "heartbeat lists 1000000 ids; the limit is 100000") {
			t.Fatalf("a heartbeat of a million ids: status %s %q, want 3 (invalid_argument) naming the limit", code, msg)
		}
	}
	refuse() // the connection and the pools warm up
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range frames {
		refuse()
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	perFrame := int64(after.TotalAlloc-before.TotalAlloc) / frames
	mallocs := (after.Mallocs - before.Mallocs) / frames
	kept := int64(after.HeapInuse) - int64(before.HeapInuse)
	t.Logf("a refused heartbeat of %d bytes: %d MiB allocated, %d allocations; heap in use after GC %+d MiB over %d frames",
		len(hb), perFrame>>20, mallocs, kept>>20, frames)
	// Reading the frame: connect reads it into a buffer that doubles from
	// 512 bytes up to 32 MiB, 64 MiB in all (twice that under the race
	// detector, whose instrumentation allocates each growth twice).
	read := int64(64 << 20)
	if raceEnabled {
		read *= 2
	}
	if limit := read + 32<<20; perFrame > limit {
		t.Errorf("a refused frame allocated %d MiB, want at most %d MiB (its read and a little)", perFrame>>20, limit>>20)
	}
	if mallocs > 10_000 {
		t.Errorf("a refused frame made %d allocations, want at most 10,000 (its ids must not be decoded)", mallocs)
	}
	if kept > 64<<20 {
		t.Errorf("heap in use grew by %d MiB over %d refused frames, want under 64 MiB", kept>>20, frames)
	}
}
