package server_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"connectrpc.com/grpcreflect"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/gen/conveyor/v1/conveyorv1connect"
	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

// A shutdown whose HTTP drain runs out of time still stops the timer
// loops and the hub, and closes the store, on a budget of its own: the
// error names the drain alone, not every background service that was
// given the expired context (operations.md: "exits with status 1 and
// http shutdown: context deadline exceeded").
func TestStopPastShutdownTimeoutStopsTheRestCleanly(t *testing.T) {
	for range 5 {
		s, err := server.New(server.Config{
			Listen: "127.0.0.1:0", DataDir: t.TempDir(),
			ShutdownTimeout: 200 * time.Millisecond,
			Logger:          slog.New(slog.NewTextHandler(io.Discard, nil)),
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		conn := callInProgress(t, s.Addr().String())
		err = s.Stop(context.Background())
		_ = conn.Close()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Stop = %v, want the HTTP drain's deadline exceeded", err)
		}
		if got, want := err.Error(), "http shutdown: context deadline exceeded"; got != want {
			t.Fatalf("Stop = %q, want %q: the loops, the hub and the store must stop on a budget of their own", got, want)
		}
	}
}

// callInProgress starts an Enqueue whose body never comes, and returns once
// its handler is reading that body: the request asks for a 100 Continue,
// which the server sends on the handler's first read.
func callInProgress(t *testing.T, addr string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	_, err = io.WriteString(conn, "POST /conveyor.v1.TaskService/Enqueue HTTP/1.1\r\nHost: 127.0.0.1\r\n"+
		"Content-Type: application/json\r\nContent-Length: 100\r\nExpect: 100-continue\r\n\r\n")
	if err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(time.Minute))
	status, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil || !strings.HasPrefix(status, "HTTP/1.1 100 ") {
		t.Fatalf("the server answered the half-sent call with %q, %v; want a 100 Continue", status, err)
	}
	return conn
}

// TestStopEndsEveryStream: a graceful Stop ends the streams that would
// otherwise hold the HTTP drain until the shutdown timeout: a health Watch
// stream (it needs no token) is sent NOT_SERVING and then ends cleanly, a
// worker stream that has not sent its Hello ends with unavailable, and a
// reflection stream left open ends. Stop returns nil, well inside a
// shutdown timeout that would otherwise run out.
func TestStopEndsEveryStream(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{Token: "s3cret", ShutdownTimeout: 8 * time.Second})
	hc := servertest.HTTPClient() // one connection for every stream and call
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	watch := grpchealth.NewClient(hc, s.URL(), connect.WithGRPC()).Watch(ctx, &grpchealth.CheckRequest{})
	if ev := <-watch; ev.Err != nil || ev.Response.Status != grpchealth.StatusServing {
		t.Fatalf("the Watch stream's first status: %+v, want SERVING", ev)
	}
	session := conveyorv1connect.NewWorkerServiceClient(hc, s.URL(), connect.WithGRPC(), servertest.BearerToken("s3cret")).Session(ctx)
	defer func() { _ = session.CloseResponse() }()
	if err := session.Send(nil); err != nil { // the stream opens; no Hello follows
		t.Fatal(err)
	}
	reflection := grpcreflect.NewClient(hc, s.URL(), connect.WithGRPC(), servertest.BearerToken("s3cret")).NewStream(ctx)
	defer func() { _, _ = reflection.Close() }()
	if _, err := reflection.ListServices(); err != nil {
		t.Fatal(err)
	}
	// A call after it on the same connection: once it is answered, the
	// server has taken in the session stream's opening.
	tasks := conveyorv1connect.NewTaskServiceClient(hc, s.URL(), connect.WithGRPC(), servertest.BearerToken("s3cret"))
	if _, err := tasks.Enqueue(ctx, connect.NewRequest(&conveyorv1.EnqueueRequest{Type: "t"})); err != nil {
		t.Fatal(err)
	}

	stopped := make(chan error, 1)
	go func() { stopped <- s.Stop(context.Background()) }()
	ev, ok := <-watch
	if !ok || ev.Err != nil || ev.Response.Status != grpchealth.StatusNotServing {
		t.Fatalf("the Watch stream at shutdown: %+v (open %v), want NOT_SERVING", ev, ok)
	}
	if ev, ok := <-watch; ok {
		t.Fatalf("the Watch stream after NOT_SERVING: %+v, want its clean end", ev)
	}
	if _, err := session.Receive(); connect.CodeOf(err) != connect.CodeUnavailable {
		t.Fatalf("the session without a Hello at shutdown: %v, want unavailable", err)
	}
	if err := <-stopped; err != nil {
		t.Fatalf("Stop = %v, want nil: no stream may hold the HTTP drain", err)
	}
	if _, err := reflection.ListServices(); err == nil {
		t.Fatal("the reflection stream still answers after Stop")
	}
}
