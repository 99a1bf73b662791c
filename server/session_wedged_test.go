package server_test

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

// wedgedWorker speaks HTTP/2 (h2c, gRPC) by hand, so that it can open a
// session and then never grant the server any flow-control window past the
// initial 64 KiB, as a frozen worker process whose socket stays open does.
// It acknowledges SETTINGS and answers PINGs, so the connection stays
// healthy, and it can keep sending frames on its stream.
type wedgedWorker struct {
	mu   sync.Mutex
	conn net.Conn
}

const (
	h2Data      = 0x0
	h2Headers   = 0x1
	h2Settings  = 0x4
	h2Ping      = 0x6
	h2Ack       = 0x1
	h2EndStream = 0x1
	h2EndHdrs   = 0x4
)

func (w *wedgedWorker) frame(typ, flags byte, stream uint32, payload []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	h := make([]byte, 9, 9+len(payload))
	h[0], h[1], h[2] = byte(len(payload)>>16), byte(len(payload)>>8), byte(len(payload))
	h[3], h[4] = typ, flags
	binary.BigEndian.PutUint32(h[5:], stream)
	_, err := w.conn.Write(append(h, payload...))
	return err
}

// send writes one gRPC message on stream 1.
func (w *wedgedWorker) send(m *conveyorv1.WorkerMessage) error {
	b, err := proto.Marshal(m)
	if err != nil {
		return err
	}
	env := make([]byte, 5, 5+len(b))
	binary.BigEndian.PutUint32(env[1:], uint32(len(b)))
	return w.frame(h2Data, 0, 1, append(env, b...))
}

// closeSend half-closes stream 1: the worker sends nothing more.
func (w *wedgedWorker) closeSend() error { return w.frame(h2Data, h2EndStream, 1, nil) }

// hpackLiteral encodes a header as a literal without indexing, with no
// Huffman coding (every string here is under 127 bytes).
func hpackLiteral(name, value string) []byte {
	out := append([]byte{0x00, byte(len(name))}, name...)
	return append(append(out, byte(len(value))), value...)
}

func dialWedgedWorker(t *testing.T, s *servertest.Server, hello *conveyorv1.Hello) *wedgedWorker {
	t.Helper()
	c, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	w := &wedgedWorker{conn: c}
	if _, err := c.Write([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	if err := w.frame(h2Settings, 0, 0, nil); err != nil { // the defaults: 64 KiB windows
		t.Fatal(err)
	}
	go func() { // read every frame; never send WINDOW_UPDATE
		hdr := make([]byte, 9)
		for {
			if _, err := io.ReadFull(c, hdr); err != nil {
				return
			}
			payload := make([]byte, int(hdr[0])<<16|int(hdr[1])<<8|int(hdr[2]))
			if _, err := io.ReadFull(c, payload); err != nil {
				return
			}
			switch {
			case hdr[3] == h2Settings && hdr[4]&h2Ack == 0:
				_ = w.frame(h2Settings, h2Ack, 0, nil)
			case hdr[3] == h2Ping && hdr[4]&h2Ack == 0:
				_ = w.frame(h2Ping, h2Ack, 0, payload)
			}
		}
	}()
	var hb []byte
	for _, kv := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", "/conveyor.v1.WorkerService/Session"},
		{":authority", s.Addr().String()}, {"content-type", "application/grpc"}, {"te", "trailers"}} {
		hb = append(hb, hpackLiteral(kv[0], kv[1])...)
	}
	if err := w.frame(h2Headers, h2EndHdrs, 1, hb); err != nil {
		t.Fatal(err)
	}
	if err := w.send(&conveyorv1.WorkerMessage{Frame: &conveyorv1.WorkerMessage_Hello{Hello: hello}}); err != nil {
		t.Fatal(err)
	}
	return w
}

// TestStopCutsAWedgedWorker: a worker that stops reading but keeps its
// side of the stream open (it even keeps sending heartbeats) holds the
// server's send loop in a write that HTTP/2 flow control blocks. A
// graceful Stop ends its session, which releases its leases at once and
// must also cut that write, so Stop finishes promptly rather than waiting
// out its whole budget and failing.
func TestStopCutsAWedgedWorker(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	tasks := taskClient(t, s, servertest.GRPC)
	for range 4 {
		enqueue(t, tasks, &conveyorv1.EnqueueRequest{Queue: "q", Type: "t", Payload: make([]byte, 100<<10)})
	}
	w := dialWedgedWorker(t, s, &conveyorv1.Hello{Queues: map[string]int32{"q": 1}, Concurrency: 4})
	stop := make(chan struct{})
	defer close(stop)
	go func() { // alive: it keeps heartbeating
		for {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
			_ = w.send(&conveyorv1.WorkerMessage{Frame: &conveyorv1.WorkerMessage_Heartbeat{Heartbeat: &conveyorv1.Heartbeat{}}})
		}
	}()
	// 4 x 100 KiB cannot pass a 64 KiB window: the send loop is blocked.
	servertest.Eventually(t, 10*time.Second, "every task leased", func() bool { return queueCounts(t, s, "q").GetActive() == 4 })
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
	defer cancel()
	start := time.Now()
	if err := s.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v (after %s)", err, time.Since(start).Round(time.Millisecond))
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("Stop took %s with a wedged worker connected, want about a second", took)
	}
}

// TestHalfCloseReleasesWhileSendIsBlocked: a worker that stops reading and
// then closes its request side gets its leases released, with no retry
// burned, and its session ended (the blocked write cut after its grace),
// even though the server's send is blocked on HTTP/2 flow control. The
// leases outlive the test: only the half-close can release them.
func TestHalfCloseReleasesWhileSendIsBlocked(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{LeaseTTL: time.Hour})
	tasks := taskClient(t, s, servertest.GRPC)
	var ids []string
	for range 4 {
		ids = append(ids, enqueue(t, tasks, &conveyorv1.EnqueueRequest{Queue: "q", Type: "t", Payload: make([]byte, 100<<10)}))
	}
	w := dialWedgedWorker(t, s, &conveyorv1.Hello{Queues: map[string]int32{"q": 1}, Concurrency: 4})
	// 4 x 100 KiB cannot pass a 64 KiB window: the send loop is blocked.
	servertest.Eventually(t, 10*time.Second, "every task leased", func() bool { return queueCounts(t, s, "q").GetActive() == 4 })
	if err := w.closeSend(); err != nil {
		t.Fatal(err)
	}
	servertest.Eventually(t, 10*time.Second, "leases released", func() bool {
		q := queueCounts(t, s, "q")
		return q.GetActive() == 0 && q.GetPending() == 4 && s.Stats().Sessions == 0
	})
	for _, id := range ids {
		got, err := tasks.GetTask(context.Background(), connect.NewRequest(&conveyorv1.GetTaskRequest{Id: id}))
		if err != nil || got.Msg.GetRetried() != 0 {
			t.Fatalf("task %s after the half-close: retried %d, %v; want 0", id, got.Msg.GetRetried(), err)
		}
	}
}
