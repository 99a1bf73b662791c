package main

import (
	"context"
	"strings"
	"testing"

	"connectrpc.com/connect"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/gen/conveyor/v1/conveyorv1connect"
	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

// openWorker holds a session open with hello until the test ends.
func openWorker(t *testing.T, s *servertest.Server, hello *conveyorv1.Hello) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	stream := conveyorv1connect.NewWorkerServiceClient(servertest.HTTPClient(), s.URL(), connect.WithGRPC()).Session(ctx)
	if err := stream.Send(&conveyorv1.WorkerMessage{Frame: &conveyorv1.WorkerMessage_Hello{Hello: hello}}); err != nil {
		t.Fatal(err)
	}
	if m, err := stream.Receive(); err != nil || m.GetWelcome() == nil {
		t.Fatalf("no Welcome: %v %v", m, err)
	}
}

// TestReleaseCommands: release ls lists the releases seen with their live
// sessions, release drain marks one, and workers shows each session's
// types and release.
func TestReleaseCommands(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	addr := "--addr=" + s.URL()
	openWorker(t, s, &conveyorv1.Hello{Queues: map[string]int32{"default": 1}, Concurrency: 1, ReleaseId: "v1", Types: []string{"email", "sms"}})
	openWorker(t, s, &conveyorv1.Hello{Queues: map[string]int32{"default": 1}, Concurrency: 1, ReleaseId: "v2"})

	ls := mustRun(t, "release", "ls", addr)
	lines := strings.Split(strings.TrimSpace(ls), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[1], "v2 ") || !strings.HasPrefix(lines[2], "v1 ") {
		t.Fatalf("release ls:\n%s\nwant v2 then v1", ls)
	}
	if out := mustRun(t, "release", "drain", addr, "v1"); !strings.Contains(out, "release v1 drained") {
		t.Fatalf("release drain: %q", out)
	}
	if ls := mustRun(t, "release", "ls", addr); !strings.Contains(ls, "v1") || !strings.Contains(strings.Split(ls, "\n")[2], "yes") {
		t.Fatalf("release ls after the drain:\n%s", ls)
	}
	workers := mustRun(t, "workers", addr)
	if !strings.Contains(workers, "email,sms") || !strings.Contains(workers, "v1 (draining)") || !strings.Contains(workers, "v2") {
		t.Fatalf("workers:\n%s\nwant types email,sms and release v1 (draining)", workers)
	}
	_, err := runCLI(t, "", "release", "drain", addr, "v9")
	if exitCode(err) != 3 {
		t.Fatalf("release drain of an unknown release: %v (exit %d), want exit 3", err, exitCode(err))
	}
}
