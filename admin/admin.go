// Package admin serves the web dashboard: the assets built from the
// TypeScript source in admin/web (committed in admin/dist, embedded in the
// binary, so building Conveyor needs no Node). The dashboard is a client of
// AdminService like the CLI; this package only serves its files.
package admin

import (
	"embed"
	"io/fs"
	"net/http"
)

//go:embed all:dist
var dist embed.FS

// Handler serves the dashboard's files under prefix (such as "/ui/"); any
// path that names no file serves index.html, so the dashboard's own routes
// are shareable URLs.
func Handler(prefix string) http.Handler {
	root, err := fs.Sub(dist, "dist")
	if err != nil {
		panic(err) // the embedded tree always has dist
	}
	files := http.FileServerFS(root)
	return http.StripPrefix(prefix, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "" {
			if _, err := fs.Stat(root, r.URL.Path); err != nil {
				r.URL.Path = ""
			}
		}
		files.ServeHTTP(w, r)
	}))
}
