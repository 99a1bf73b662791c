package main

import (
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

// TestDebugListenerMasksTheToken: the debug listener prints the command
// line (/debug/vars' cmdline, /debug/pprof/cmdline), unauthenticated; a
// token given there with --token must not be in it, in either form.
func TestDebugListenerMasksTheToken(t *testing.T) {
	args := os.Args
	t.Cleanup(func() { os.Args = args })
	os.Args = []string{"conveyor", "server", "--token", "s3cret", "--token=s3cret", "--listen", "127.0.0.1:0"}
	srv := servertest.Start(t, server.Config{Token: "s3cret"})
	ln, err := serveDebug("127.0.0.1:0", srv.Server, "s3cret", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	for _, path := range []string{"/debug/vars", "/debug/pprof/cmdline"} {
		res, err := client.Get("http://" + ln.Addr().String() + path)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(res.Body)
		_ = res.Body.Close()
		if err != nil || res.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: HTTP %d, %v", path, res.StatusCode, err)
		}
		if strings.Contains(string(body), "s3cret") || !strings.Contains(string(body), "--listen") {
			t.Errorf("GET %s shows the token, or not the command line:\n%s", path, body)
		}
	}
}
