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

	"github.com/conveyor-dev/conveyor/server"
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
