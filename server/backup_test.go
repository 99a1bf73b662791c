package server_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/gen/conveyor/v1/conveyorv1connect"
	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

// TestBackupUnderLoadRestores takes an online backup while producers keep
// enqueuing, restores it into a fresh data directory, and finds on the
// restored server every task acknowledged before the backup began.
func TestBackupUnderLoadRestores(t *testing.T) {
	t.Parallel()
	s := servertest.StartBolt(t, server.Config{Token: "tok"})
	tasks := taskClient(t, s, servertest.GRPC, servertest.BearerToken("tok"))
	enqueueN(t, tasks, "q", "seed", 2000)

	var mu sync.Mutex
	var acked []string
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				res, err := tasks.Enqueue(context.Background(), connect.NewRequest(&conveyorv1.EnqueueRequest{Queue: "q", Type: "live"}))
				if err != nil {
					return
				}
				mu.Lock()
				acked = append(acked, res.Msg.GetTask().GetId())
				mu.Unlock()
			}
		}()
	}
	servertest.Eventually(t, 10*time.Second, "load running", func() bool { mu.Lock(); defer mu.Unlock(); return len(acked) > 100 })
	mu.Lock()
	before := append([]string(nil), acked...)
	mu.Unlock()

	hc := servertest.HTTP1Client()
	defer hc.CloseIdleConnections()
	req, _ := http.NewRequest(http.MethodGet, s.URL()+server.BackupPath, nil)
	if res, err := hc.Do(req); err != nil || res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("backup without the token: %v %v, want 401", res, err)
	} else {
		_ = res.Body.Close()
	}
	req.Header.Set("Authorization", "Bearer tok")
	res, err := hc.Do(req)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("backup: %v %v", res, err)
	}
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, server.DataFile))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(f, res.Body); err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	close(stop)
	wg.Wait()

	restored := servertest.StartBolt(t, server.Config{DataDir: dir})
	rt := taskClient(t, restored, servertest.GRPC)
	for _, id := range before {
		if _, err := rt.GetTask(context.Background(), connect.NewRequest(&conveyorv1.GetTaskRequest{Id: id})); err != nil {
			t.Fatalf("task %s, acknowledged before the backup, is missing from it: %v", id, err)
		}
	}
	if q := queueCounts(t, restored, "q"); q.GetPending() < int64(2000+len(before)) {
		t.Fatalf("restored queue holds %d pending, want at least %d", q.GetPending(), 2000+len(before))
	}
}

// TestBackupStalledClient: a backup whose client stops reading fails once
// a write has waited BackupStallTimeout, and so lets go of its read
// transaction; the server goes on.
func TestBackupStalledClient(t *testing.T) {
	t.Parallel()
	failed := make(chan struct{})
	var once sync.Once
	log := slog.New(onMessages{"backup failed": func() { once.Do(func() { close(failed) }) }})
	s := servertest.StartBolt(t, server.Config{Logger: log, BackupStallTimeout: 200 * time.Millisecond})
	tasks := fillBeyondSocketBuffers(t, s)
	hc := servertest.HTTP1Client()
	defer hc.CloseIdleConnections()
	res, err := hc.Get(s.URL() + server.BackupPath)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = res.Body.Close() }()
	if _, err := res.Body.Read(make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	select { // the client reads no more
	case <-failed:
	case <-time.After(30 * time.Second):
		t.Fatal("a backup whose client stopped reading still runs after 30s")
	}
	if _, err := tasks.Enqueue(context.Background(), connect.NewRequest(&conveyorv1.EnqueueRequest{Queue: "q", Type: "after"})); err != nil {
		t.Fatalf("enqueue after the failed backup: %v", err)
	}
}

// TestBackupCanceledByTheClient: a client that goes away mid-backup (Ctrl-C
// on conveyor backup or curl) ends it with an Info record, not the ERROR
// "backup failed" an alert would page on.
func TestBackupCanceledByTheClient(t *testing.T) {
	t.Parallel()
	canceled := make(chan struct{})
	var once sync.Once
	var failed atomic.Bool
	log := slog.New(onMessages{
		"backup canceled by the client": func() { once.Do(func() { close(canceled) }) },
		"backup failed":                 func() { failed.Store(true) },
	})
	s := servertest.StartBolt(t, server.Config{Logger: log})
	fillBeyondSocketBuffers(t, s)
	hc := servertest.HTTP1Client()
	defer hc.CloseIdleConnections()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL()+server.BackupPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := res.Body.Read(make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	cancel()
	_ = res.Body.Close()
	select {
	case <-canceled:
	case <-time.After(30 * time.Second):
		t.Fatal("no 'backup canceled by the client' record 30s after the client went away")
	}
	if failed.Load() {
		t.Error("a backup its client canceled was logged as failed")
	}
}

// TestBackupHead: a HEAD of the backup (curl -I) answers the headers a GET
// would, without taking a backup.
func TestBackupHead(t *testing.T) {
	t.Parallel()
	var written atomic.Int32
	log := slog.New(onMessages{"backup written": func() { written.Add(1) }})
	s := servertest.StartBolt(t, server.Config{Logger: log})
	// One connection: the GET is served only once the HEAD's handler has
	// returned, so when the GET's backup is logged, the HEAD's would be.
	tr := &http.Transport{MaxConnsPerHost: 1}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	res, err := hc.Head(s.URL() + server.BackupPath)
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "application/octet-stream" {
		t.Fatalf("HEAD %s: %s, Content-Type %q", server.BackupPath, res.Status, res.Header.Get("Content-Type"))
	}
	get, err := hc.Get(s.URL() + server.BackupPath)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(io.Discard, get.Body); err != nil {
		t.Fatal(err)
	}
	_ = get.Body.Close()
	servertest.Eventually(t, 10*time.Second, "the GET's backup written", func() bool { return written.Load() >= 1 })
	if n := written.Load(); n != 1 {
		t.Errorf("%d backups written for a HEAD and a GET, want the GET's alone", n)
	}
}

// fillBeyondSocketBuffers stores 40 MiB of tasks, so that a backup of the
// store is far more than the socket buffers hold and its client's pace
// shows in it, and returns the task client.
func fillBeyondSocketBuffers(t *testing.T, s *servertest.Server) conveyorv1connect.TaskServiceClient {
	t.Helper()
	tasks := taskClient(t, s, servertest.GRPC)
	big := make([]*conveyorv1.EnqueueRequest, 20)
	for i := range big {
		big[i] = &conveyorv1.EnqueueRequest{Queue: "q", Type: "big", Payload: make([]byte, server.MaxPayloadBytes)}
	}
	for range 2 {
		if _, err := tasks.EnqueueBatch(context.Background(), connect.NewRequest(&conveyorv1.EnqueueBatchRequest{Items: big})); err != nil {
			t.Fatal(err)
		}
	}
	return tasks
}

// onMessages is a log handler that calls the func of each record's
// message, if it has one.
type onMessages map[string]func()

func (h onMessages) Enabled(context.Context, slog.Level) bool { return true }
func (h onMessages) Handle(_ context.Context, r slog.Record) error {
	if do := h[r.Message]; do != nil {
		do()
	}
	return nil
}
func (h onMessages) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h onMessages) WithGroup(string) slog.Handler      { return h }
