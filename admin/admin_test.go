package admin_test

import (
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/conveyor-dev/conveyor/admin"
)

// response is what the handler answered, its body read (and gunzipped).
type response struct {
	status int
	header http.Header
	body   string
}

func get(t *testing.T, h http.Handler, path string, header map[string]string) response {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	r := io.Reader(rec.Body)
	if rec.Header().Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(rec.Body)
		if err != nil {
			t.Fatalf("gzip: %v", err)
		}
		r = zr
	}
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	return response{status: rec.Code, header: rec.Header(), body: string(b)}
}

// assetPath is the dashboard's script, as index.html names it.
func assetPath(t *testing.T, h http.Handler) string {
	t.Helper()
	index := get(t, h, "/ui/", nil).body
	m := regexp.MustCompile(`src="(/ui/assets/[^"]+\.js)"`).FindStringSubmatch(index)
	if m == nil {
		t.Fatalf("index.html names no script:\n%s", index)
	}
	return m[1]
}

func TestHandlerServesIndexForEveryRoute(t *testing.T) {
	t.Parallel()
	h := admin.Handler("/ui/")
	for _, path := range []string{"/ui/", "/ui/tasks", "/ui/tasks/01J0000000000000000000000", "/ui/queues/a.b-c", "/ui/crons/new"} {
		res := get(t, h, path, nil)
		if res.status != http.StatusOK || !strings.Contains(res.body, `<div id="app">`) {
			t.Errorf("GET %s: %d, want index.html:\n%s", path, res.status, res.body)
		}
		if cc := res.header.Get("Cache-Control"); cc != "no-cache" {
			t.Errorf("GET %s: Cache-Control %q, want no-cache", path, cc)
		}
		if csp := res.header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") {
			t.Errorf("GET %s: Content-Security-Policy %q", path, csp)
		}
	}
}

func TestHandlerAssets(t *testing.T) {
	t.Parallel()
	h := admin.Handler("/ui/")
	js := assetPath(t, h)

	res := get(t, h, js, map[string]string{"Accept-Encoding": "gzip, br"})
	if res.status != http.StatusOK {
		t.Fatalf("GET %s: %d", js, res.status)
	}
	if ce := res.header.Get("Content-Encoding"); ce != "gzip" {
		t.Errorf("Content-Encoding %q, want gzip", ce)
	}
	if cc := res.header.Get("Cache-Control"); !strings.Contains(cc, "immutable") {
		t.Errorf("Cache-Control %q, want immutable", cc)
	}
	if ct := res.header.Get("Content-Type"); !strings.Contains(ct, "javascript") {
		t.Errorf("Content-Type %q, want JavaScript", ct)
	}

	plain := get(t, h, js, map[string]string{"Accept-Encoding": "gzip;q=0"})
	if ce := plain.header.Get("Content-Encoding"); ce != "" {
		t.Errorf("with gzip;q=0: Content-Encoding %q, want none", ce)
	}
	if plain.body != res.body {
		t.Errorf("the gzipped and the plain script differ (%d and %d bytes)", len(res.body), len(plain.body))
	}

	etag := res.header.Get("ETag")
	if again := get(t, h, js, map[string]string{"If-None-Match": etag}); again.status != http.StatusNotModified {
		t.Errorf("If-None-Match %s: %d, want 304", etag, again.status)
	}
}

func TestHandlerUnknownAssetIsNotFound(t *testing.T) {
	t.Parallel()
	if res := get(t, admin.Handler("/ui/"), "/ui/assets/index-gone.js", nil); res.status != http.StatusNotFound {
		t.Errorf("a missing asset: %d, want 404 (not index.html as JavaScript)", res.status)
	}
}
