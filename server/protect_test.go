package server_test

import (
	"io"
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

// TestBrowserProtectionBySecFetchSite: without a token, a request the
// browser marks as made by a page of another site (Sec-Fetch-Site:
// cross-site), or of another origin on this site (same-site: another port
// of localhost), is refused with 403, saying why, before any handler: an
// <img src=".../backup"> sends no Origin header, and must not stream a
// backup. The dashboard's own requests (same-origin), an address typed in
// the browser (none) and clients that are not browsers (no header) pass.
func TestBrowserProtectionBySecFetchSite(t *testing.T) {
	t.Parallel()
	s := servertest.StartBolt(t, server.Config{}) // its /backup answers
	get := func(path string) func() *http.Request {
		return func() *http.Request {
			req, _ := http.NewRequest(http.MethodGet, s.URL()+path, nil)
			return req
		}
	}
	enqueue := func() *http.Request {
		req, _ := http.NewRequest(http.MethodPost, s.URL()+"/conveyor.v1.TaskService/Enqueue", strings.NewReader(`{"type":"t"}`))
		req.Header.Set("Content-Type", "application/json")
		return req
	}
	requests := map[string]func() *http.Request{
		"backup":    get(server.BackupPath),
		"metrics":   get(server.MetricsPath),
		"enqueue":   enqueue,
		"dashboard": get("/ui/"),
	}
	for name, req := range requests {
		for site, want := range map[string]int{
			"cross-site":  http.StatusForbidden,
			"same-site":   http.StatusForbidden,
			"Cross-Site":  http.StatusForbidden,
			"same-origin": http.StatusOK,
			"none":        http.StatusOK,
			"":            http.StatusOK,
		} {
			r := req()
			if site != "" {
				r.Header.Set("Sec-Fetch-Site", site)
			}
			res, err := http.DefaultClient.Do(r)
			if err != nil {
				t.Fatalf("%s, Sec-Fetch-Site %q: %v", name, site, err)
			}
			body := make([]byte, 512)
			n, _ := io.ReadFull(res.Body, body)
			_ = res.Body.Close()
			if res.StatusCode != want {
				t.Errorf("%s, Sec-Fetch-Site %q: HTTP %d, want %d", name, site, res.StatusCode, want)
			}
			if want == http.StatusForbidden && !strings.Contains(string(body[:n]), "Sec-Fetch-Site: "+strings.ToLower(site)) {
				t.Errorf("%s, Sec-Fetch-Site %q: the refusal does not say why: %.80q", name, site, body[:n])
			}
		}
	}
}
