// Package admin serves the web dashboard: the assets built from the
// TypeScript source in admin/web (committed in admin/dist, embedded in the
// binary, so building Conveyor needs no Node). The dashboard is a client of
// AdminService like the CLI; this package only serves its files.
//
// `make ui` rebuilds admin/dist from admin/web, and `make ui-check` (run by
// CI) fails when the committed files are not what the source builds.
package admin

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"
)

//go:embed all:dist
var dist embed.FS

// contentSecurityPolicy keeps the dashboard to its own origin: its scripts,
// styles and RPCs come from the server that served it, and no other page
// may frame it.
const contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; " +
	"img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'"

// asset is one file of the dashboard, ready to serve.
type asset struct {
	body        []byte
	gzipped     []byte // nil when compression does not pay
	contentType string
	etag        string
	immutable   bool // its name carries a hash of its content
}

// Handler serves the dashboard's files under prefix (such as "/ui/"); any
// path that names no file serves index.html, so the dashboard's own routes
// are shareable URLs.
//
// Files under assets/ have content hashes in their names and are cached
// for a year; index.html is revalidated on every load (by ETag), so a new
// server version is picked up at once. Text files are served gzipped to
// clients that accept it.
func Handler(prefix string) http.Handler {
	root, err := fs.Sub(dist, "dist")
	if err != nil {
		panic(err) // the embedded tree always has dist
	}
	assets, err := load(root)
	if err != nil {
		panic(err) // the embedded files always read
	}
	index := assets["index.html"]
	return http.StripPrefix(prefix, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a, ok := assets[r.URL.Path]
		if !ok || a == nil {
			if strings.HasPrefix(r.URL.Path, "assets/") {
				// A stale page asking for an asset of another build: a
				// 404 rather than index.html served as JavaScript.
				http.NotFound(w, r)
				return
			}
			a = index
		}
		serve(w, r, a)
	}))
}

// load reads every embedded file once and compresses the text ones.
func load(root fs.FS) (map[string]*asset, error) {
	out := map[string]*asset{}
	err := fs.WalkDir(root, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := fs.ReadFile(root, name)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(body)
		a := &asset{
			body:        body,
			contentType: mime.TypeByExtension(path.Ext(name)),
			etag:        `"` + hex.EncodeToString(sum[:12]) + `"`,
			immutable:   strings.HasPrefix(name, "assets/"),
		}
		if a.contentType == "" {
			a.contentType = http.DetectContentType(body)
		}
		if compressible(a.contentType) && len(body) > 1024 {
			var buf bytes.Buffer
			zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
			_, _ = zw.Write(body)
			_ = zw.Close()
			if buf.Len() < len(body) {
				a.gzipped = buf.Bytes()
			}
		}
		out[name] = a
		return nil
	})
	return out, err
}

func compressible(contentType string) bool {
	for _, p := range []string{"text/", "application/javascript", "text/javascript", "application/json", "image/svg+xml"} {
		if strings.HasPrefix(contentType, p) {
			return true
		}
	}
	return false
}

func serve(w http.ResponseWriter, r *http.Request, a *asset) {
	h := w.Header()
	h.Set("Content-Type", a.contentType)
	h.Set("ETag", a.etag)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	if a.immutable {
		h.Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		h.Set("Cache-Control", "no-cache")
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Frame-Options", "DENY")
	}
	body := a.body
	if a.gzipped != nil {
		h.Add("Vary", "Accept-Encoding")
		if acceptsGzip(r) {
			h.Set("Content-Encoding", "gzip")
			body = a.gzipped
		}
	}
	if match := r.Header.Get("If-None-Match"); match != "" && etagMatches(match, a.etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
}

// acceptsGzip reports whether the request's Accept-Encoding allows gzip
// (a q=0 refuses it).
func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		name, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if !strings.EqualFold(strings.TrimSpace(name), "gzip") {
			continue
		}
		q := strings.ReplaceAll(strings.TrimSpace(params), " ", "")
		return q != "q=0" && q != "q=0.0" && q != "q=0.00" && q != "q=0.000"
	}
	return false
}

// etagMatches implements If-None-Match's weak comparison for one ETag.
func etagMatches(header, etag string) bool {
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
		if t == "*" || t == etag {
			return true
		}
	}
	return false
}
