package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/gen/conveyor/v1/conveyorv1connect"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

// binDir holds the binary buildBinary compiled; TestMain removes it.
var binDir string

// buildBinary compiles the conveyor command once per test binary.
var buildBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "conveyor-bin-")
	if err != nil {
		return "", err
	}
	binDir = dir
	bin := filepath.Join(dir, "conveyor")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build: %w\n%s", err, out)
	}
	return bin, nil
})

// conveyorBinary returns the conveyor command built for the tests. Tests
// that run it are skipped under -short (the build takes a while).
func conveyorBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the conveyor binary")
	}
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// childServer is a `conveyor server` process.
type childServer struct {
	cmd    *exec.Cmd
	url    string
	stderr *syncBuffer
}

// startChild starts `conveyor server` on dataDir, with flags added, and
// waits until it serves.
func startChild(t *testing.T, dataDir string, flags ...string) *childServer {
	t.Helper()
	return runChild(t, append([]string{"server", "--listen", "127.0.0.1:0", "--data-dir", dataDir}, flags...)...)
}

// runChild runs the conveyor command with args, a server, and waits until
// it serves. The test's end kills it.
func runChild(t *testing.T, args ...string) *childServer {
	t.Helper()
	cmd := exec.Command(conveyorBinary(t), args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := new(syncBuffer)
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if url, ok := strings.CutPrefix(sc.Text(), "conveyor serving on "); ok {
				lines <- url
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case url := <-lines:
		return &childServer{cmd: cmd, url: url, stderr: stderr}
	case <-time.After(60 * time.Second):
		t.Fatalf("server did not start; stderr:\n%s", stderr.String())
	}
	return nil
}

// syncBuffer is a bytes.Buffer a child process writes while the test
// reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestAcknowledgedEnqueuesSurviveSIGKILL streams concurrent enqueues into a
// child server, kills it with SIGKILL mid-stream, restarts it on the same
// data directory and checks that every acknowledged task is there, intact.
func TestAcknowledgedEnqueuesSurviveSIGKILL(t *testing.T) {
	dataDir := t.TempDir()
	child := startChild(t, dataDir)
	client := conveyorv1connect.NewTaskServiceClient(servertest.HTTPClient(), child.url, connect.WithGRPC())

	type acked struct{ id, payload string }
	var mu sync.Mutex
	var acks []acked
	var count atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				payload := fmt.Sprintf(`{"producer":%d,"seq":%d}`, g, i)
				if g%4 == 0 { // a quarter of the producers use batches
					items := make([]*conveyorv1.EnqueueRequest, 10)
					for j := range items {
						items[j] = &conveyorv1.EnqueueRequest{Type: "t", Payload: []byte(fmt.Sprintf("%s#%d", payload, j))}
					}
					res, err := client.EnqueueBatch(ctx, connect.NewRequest(&conveyorv1.EnqueueBatchRequest{Items: items}))
					if err != nil {
						return
					}
					mu.Lock()
					for j, r := range res.Msg.GetResults() {
						acks = append(acks, acked{r.GetTask().GetId(), string(items[j].GetPayload())})
					}
					mu.Unlock()
					count.Add(10)
					continue
				}
				res, err := client.Enqueue(ctx, connect.NewRequest(&conveyorv1.EnqueueRequest{Type: "t", Payload: []byte(payload)}))
				if err != nil {
					return // the server is gone
				}
				mu.Lock()
				acks = append(acks, acked{res.Msg.GetTask().GetId(), payload})
				mu.Unlock()
				count.Add(1)
			}
		}()
	}
	servertest.Eventually(t, 60*time.Second, "3000 acknowledged enqueues", func() bool { return count.Load() >= 3000 })
	if err := child.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	wg.Wait() // every producer sees the connection drop
	_ = child.cmd.Wait()

	restarted := startChild(t, dataDir)
	client = conveyorv1connect.NewTaskServiceClient(servertest.HTTPClient(), restarted.url, connect.WithGRPC())
	mu.Lock()
	defer mu.Unlock()
	t.Logf("checking %d acknowledged tasks after SIGKILL", len(acks))
	for _, a := range acks {
		got, err := client.GetTask(context.Background(), connect.NewRequest(&conveyorv1.GetTaskRequest{Id: a.id}))
		if err != nil {
			t.Fatalf("acknowledged task %s lost after SIGKILL: %v", a.id, err)
		}
		if string(got.Msg.GetPayload()) != a.payload || got.Msg.GetState() != conveyorv1.TaskState_TASK_STATE_PENDING {
			t.Fatalf("task %s changed: state %v payload %q, want PENDING %q", a.id, got.Msg.GetState(), got.Msg.GetPayload(), a.payload)
		}
	}
}

// TestSIGTERMShutsDownCleanly sends SIGTERM to a server holding a worker
// session with a leased task: the session ends with unavailable, the
// process exits with status 0, and after a restart the task is pending
// again with no retry counted.
func TestSIGTERMShutsDownCleanly(t *testing.T) {
	dataDir := t.TempDir()
	child := startChild(t, dataDir)
	tasks := conveyorv1connect.NewTaskServiceClient(servertest.HTTPClient(), child.url, connect.WithGRPC())
	res, err := tasks.Enqueue(context.Background(), connect.NewRequest(&conveyorv1.EnqueueRequest{Type: "t"}))
	if err != nil {
		t.Fatal(err)
	}
	workers := conveyorv1connect.NewWorkerServiceClient(servertest.HTTPClient(), child.url, connect.WithGRPC())
	stream := workers.Session(context.Background())
	defer func() { _ = stream.CloseResponse() }()
	if err := stream.Send(&conveyorv1.WorkerMessage{Frame: &conveyorv1.WorkerMessage_Hello{Hello: &conveyorv1.Hello{
		Queues: map[string]int32{"default": 1}, Concurrency: 1}}}); err != nil {
		t.Fatal(err)
	}
	for range 2 { // Welcome, then the Dispatch
		if _, err := stream.Receive(); err != nil {
			t.Fatal(err)
		}
	}
	if err := child.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Receive(); connect.CodeOf(err) != connect.CodeUnavailable {
		t.Fatalf("session at shutdown: %v, want unavailable", err)
	}
	_ = stream.CloseRequest()
	exited := make(chan error, 1)
	go func() { exited <- child.cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("server exit after SIGTERM: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("server still running 30s after SIGTERM")
	}

	restarted := startChild(t, dataDir)
	tasks = conveyorv1connect.NewTaskServiceClient(servertest.HTTPClient(), restarted.url, connect.WithGRPC())
	got, err := tasks.GetTask(context.Background(), connect.NewRequest(&conveyorv1.GetTaskRequest{Id: res.Msg.GetTask().GetId()}))
	if err != nil {
		t.Fatal(err)
	}
	if got.Msg.GetState() != conveyorv1.TaskState_TASK_STATE_PENDING || got.Msg.GetRetried() != 0 {
		t.Fatalf("after a graceful shutdown: state %v retried %d, want PENDING with 0", got.Msg.GetState(), got.Msg.GetRetried())
	}
}

// TestSIGTERMEndsEveryStream: a server with a health Watch stream open
// (it needs no token) and a worker stream that never sends its Hello
// exits with status 0 promptly on SIGTERM, well inside its shutdown
// timeout: both streams end at shutdown rather than holding the HTTP
// drain until the timeout runs out (status 1).
func TestSIGTERMEndsEveryStream(t *testing.T) {
	child := startChild(t, t.TempDir(), "--shutdown-timeout", "10s")
	hc := servertest.HTTPClient() // one connection for both streams and the call
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	watch := grpchealth.NewClient(hc, child.url, connect.WithGRPC()).Watch(ctx, &grpchealth.CheckRequest{})
	if ev := <-watch; ev.Err != nil || ev.Response.Status != grpchealth.StatusServing {
		t.Fatalf("the Watch stream's first status: %+v, want SERVING", ev)
	}
	session := conveyorv1connect.NewWorkerServiceClient(hc, child.url, connect.WithGRPC()).Session(ctx)
	defer func() { _ = session.CloseResponse() }()
	if err := session.Send(nil); err != nil { // the stream opens; no Hello follows
		t.Fatal(err)
	}
	tasks := conveyorv1connect.NewTaskServiceClient(hc, child.url, connect.WithGRPC())
	if _, err := tasks.Enqueue(ctx, connect.NewRequest(&conveyorv1.EnqueueRequest{Type: "t"})); err != nil {
		t.Fatal(err) // answered: the server has taken in the session's opening
	}
	if err := child.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- child.cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("server exit after SIGTERM: %v, want status 0", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("server still running 30s after SIGTERM")
	}
	if _, err := session.Receive(); connect.CodeOf(err) != connect.CodeUnavailable {
		t.Fatalf("the session without a Hello at shutdown: %v, want unavailable", err)
	}
}
