package server_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
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
		// A call in progress: its headers are in, its body never ends.
		conn, err := net.Dial("tcp", s.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		_, err = io.WriteString(conn, "POST /conveyor.v1.TaskService/Enqueue HTTP/1.1\r\nHost: 127.0.0.1\r\n"+
			"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"type\":")
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond) // let the server read the headers
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
