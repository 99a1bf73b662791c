package main

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

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

// TestDebugListenerKeepsBrowsersOut: the debug listener has no
// authentication, so the requests a web page could make are refused with
// 403 before any handler, as on the API port of a server without a token:
// DNS rebinding (a Host that is not a loopback name), another origin, and
// the browser's own word that another site or origin made the request (an
// <img> or <script> sends no Origin). A profile is not even started. What
// curl or a browser's address bar sends passes.
func TestDebugListenerKeepsBrowsersOut(t *testing.T) {
	srv := servertest.Start(t, server.Config{})
	ln, err := serveDebug("127.0.0.1:0", srv.Server, "", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	base := "http://" + ln.Addr().String()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	cases := []struct {
		name, path, header, value, host string
		want                            int
	}{
		{"curl", "/debug/vars", "", "", "", http.StatusOK},
		{"address bar", "/debug/pprof/goroutine?debug=2", "Sec-Fetch-Site", "none", "", http.StatusOK},
		{"own page", "/debug/vars", "Sec-Fetch-Site", "same-origin", "", http.StatusOK},
		{"DNS rebinding", "/debug/pprof/goroutine?debug=2", "", "", "attacker.example", http.StatusForbidden},
		{"another origin", "/debug/vars", "Origin", "http://attacker.example", "", http.StatusForbidden},
		{"cross-site, no origin", "/debug/pprof/profile?seconds=30", "Sec-Fetch-Site", "cross-site", "", http.StatusForbidden},
		{"another port of localhost", "/debug/vars", "Sec-Fetch-Site", "same-site", "", http.StatusForbidden},
	}
	for _, tc := range cases {
		req, _ := http.NewRequest(http.MethodGet, base+tc.path, nil)
		if tc.header != "" {
			req.Header.Set(tc.header, tc.value)
		}
		if tc.host != "" {
			req.Host = tc.host
		}
		res, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		body, _ := io.ReadAll(res.Body)
		_ = res.Body.Close()
		if res.StatusCode != tc.want {
			t.Errorf("%s: GET %s: HTTP %d, want %d: %.100q", tc.name, tc.path, res.StatusCode, tc.want, body)
		}
		if tc.want == http.StatusForbidden && !strings.HasPrefix(string(body), "forbidden: ") {
			t.Errorf("%s: the refusal does not say why: %.100q", tc.name, body)
		}
	}
}

// TestDebugListenerHasTimeouts: a client that sends half a request header
// and stops is cut off (ReadHeaderTimeout) rather than holding its
// connection and a goroutine for good.
func TestDebugListenerHasTimeouts(t *testing.T) {
	srv := servertest.Start(t, server.Config{})
	ln, err := serveDebug("127.0.0.1:0", srv.Server, "", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	if _, err := io.WriteString(c, "GET /debug/vars HTTP/1.1\r\nHost: 127.0.0.1\r\n"); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.Copy(io.Discard, c); err != nil {
		t.Fatalf("the half-sent request's connection was not closed within 30s: %v", err)
	}
}
