package server

import (
	"net"
	"net/http"
	"strings"
)

// browserGuard refuses, with 403, the requests a web page could make to a
// server that has no token (CONTRACT.md, "Browser protection"): one whose
// Origin names another origin than the one it was sent to (a cross-site
// request), and, on a loopback listener, one whose Host is not a loopback
// name (DNS rebinding: a page on attacker.example whose name now resolves
// to 127.0.0.1). It runs before any handler, for every path on the port.
// With a token it is not needed (a page cannot attach the token), and it
// is not installed.
func browserGuard(next http.Handler, tls, loopback bool) http.Handler {
	scheme := "http://"
	if tls {
		scheme = "https://"
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if origin := r.Header.Get("Origin"); origin != "" && !strings.EqualFold(origin, scheme+r.Host) {
			http.Error(w, "forbidden: a request from another origin ("+origin+") to a server without a token", http.StatusForbidden)
			return
		}
		if loopback && !loopbackHost(r.Host) {
			http.Error(w, "forbidden: this server listens on loopback without a token and answers only requests for localhost, 127.0.0.0/8 or [::1]", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// loopbackHost reports whether a Host header (with or without a port)
// names localhost, an address in 127.0.0.0/8, or [::1].
func loopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
