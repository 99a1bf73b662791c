package server_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

// TestBrowserProtection: without a token, a request from another origin,
// or with a Host that is not a loopback name, is refused with 403 before
// any handler runs, on every path; a request for the server's own loopback
// origin goes through. With a token the guard is off (a page cannot attach
// the token) and the token decides.
func TestBrowserProtection(t *testing.T) {
	t.Parallel()
	open := servertest.Start(t, server.Config{})
	secured := servertest.Start(t, server.Config{Token: "s3cret"})
	enqueue := func(base string) *http.Request {
		req, _ := http.NewRequest(http.MethodPost, base+"/conveyor.v1.TaskService/Enqueue", strings.NewReader(`{"type":"evil"}`))
		req.Header.Set("Content-Type", "application/json")
		return req
	}
	ui := func(base string) *http.Request {
		req, _ := http.NewRequest(http.MethodGet, base+"/ui/", nil)
		return req
	}
	scrape := func(base string) *http.Request {
		req, _ := http.NewRequest(http.MethodGet, base+server.MetricsPath, nil)
		return req
	}
	root := func(base string) *http.Request {
		req, _ := http.NewRequest(http.MethodGet, base+"/", nil)
		return req
	}
	cases := []struct {
		name   string
		srv    *servertest.Server
		req    func(string) *http.Request
		origin string
		host   string
		token  bool
		want   int
	}{
		{"enqueue, foreign origin", open, enqueue, "http://attacker.example", "", false, http.StatusForbidden},
		{"enqueue, DNS rebinding", open, enqueue, "http://attacker.example", "attacker.example:7420", false, http.StatusForbidden},
		{"enqueue, foreign host, no origin", open, enqueue, "", "attacker.example", false, http.StatusForbidden},
		{"enqueue, own origin", open, enqueue, "self", "", false, http.StatusOK},
		{"enqueue, localhost host", open, enqueue, "", "localhost:1234", false, http.StatusOK},
		{"enqueue, [::1] host", open, enqueue, "", "[::1]:80", false, http.StatusOK},
		{"enqueue, 127.9.9.9 host", open, enqueue, "", "127.9.9.9", false, http.StatusOK},
		{"ui, foreign origin", open, ui, "http://attacker.example", "", false, http.StatusForbidden},
		{"ui, foreign host", open, ui, "", "attacker.example", false, http.StatusForbidden},
		{"ui, loopback", open, ui, "", "", false, http.StatusOK},
		{"root redirects to the ui", open, root, "", "", false, http.StatusFound},
		{"metrics, foreign origin", open, scrape, "http://attacker.example", "", false, http.StatusForbidden},
		{"metrics, foreign host", open, scrape, "", "attacker.example", false, http.StatusForbidden},
		{"metrics, loopback", open, scrape, "", "", false, http.StatusOK},
		{"token, metrics without it", secured, scrape, "", "", false, http.StatusUnauthorized},
		{"token, metrics with it", secured, scrape, "", "", true, http.StatusOK},
		{"token, foreign origin, no token", secured, enqueue, "http://attacker.example", "attacker.example", false, http.StatusUnauthorized},
		{"token, with the token", secured, enqueue, "", "", true, http.StatusOK},
		{"token, ui", secured, ui, "http://attacker.example", "attacker.example", false, http.StatusOK},
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, tc := range cases {
		req := tc.req(tc.srv.URL())
		switch tc.origin {
		case "":
		case "self":
			req.Header.Set("Origin", tc.srv.URL())
		default:
			req.Header.Set("Origin", tc.origin)
		}
		if tc.host != "" {
			req.Host = tc.host
		}
		if tc.token {
			req.Header.Set("Authorization", "Bearer s3cret")
		}
		res, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		_ = res.Body.Close()
		if res.StatusCode != tc.want {
			t.Errorf("%s: HTTP %d, want %d", tc.name, res.StatusCode, tc.want)
		}
	}
	if got := open.Stats(); got.Sessions != 0 {
		t.Fatalf("sessions %d", got.Sessions)
	}
}
