// Package browserguard keeps web pages away from a port that has no
// authentication of its own: the API port of a server without a token,
// and the debug listener. A browser attaches no secret such a port could
// check, so the guard refuses, with HTTP 403 before any handler, the
// requests only a browser sends on a page's behalf:
//   - Sec-Fetch-Site cross-site or same-site: a page of another site, or
//     of another origin on this site (another port of localhost is the
//     same site, not the same origin). This catches what carries no
//     Origin header, such as <img src=".../backup">.
//   - an Origin header naming another origin than the one the request was
//     sent to (a cross-origin fetch or form, from a browser that does not
//     send Sec-Fetch-Site);
//   - on a loopback listener, a Host that is not localhost, an address in
//     127.0.0.0/8 or [::1]: DNS rebinding, a page on attacker.example
//     whose name now resolves to 127.0.0.1, is same-origin to itself.
//
// Sec-Fetch-Site same-origin or none (a typed address, a bookmark) passes,
// and so does a request without it: curl, the SDKs, the CLI.
package browserguard

import (
	"net"
	"net/http"
	"strings"
)

// Handler wraps next with the guard. tls says whether the port serves
// TLS (the scheme of its own origin); loopback whether it listens on a
// loopback address only (the Host check applies then).
func Handler(next http.Handler, tls, loopback bool) http.Handler {
	scheme := "http://"
	if tls {
		scheme = "https://"
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if reason := refusal(r, scheme, loopback); reason != "" {
			http.Error(w, "forbidden: "+reason, http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// refusal is why r is refused, or "" when it may pass.
func refusal(r *http.Request, scheme string, loopback bool) string {
	switch site := r.Header.Get("Sec-Fetch-Site"); {
	case strings.EqualFold(site, "cross-site"):
		return "the browser says a page of another site made this request (Sec-Fetch-Site: cross-site); " +
			"this port has no token, so it answers only its own pages and clients that are not browsers"
	case strings.EqualFold(site, "same-site"):
		return "the browser says a page of another origin made this request (Sec-Fetch-Site: same-site), " +
			"such as one on another port of this host; this port has no token, so it answers only its own pages and clients that are not browsers"
	}
	if origin := r.Header.Get("Origin"); origin != "" && !strings.EqualFold(origin, scheme+r.Host) {
		return "a request from another origin (" + origin + ") to a port without a token"
	}
	if loopback && !LoopbackHost(r.Host) {
		return "this port listens on loopback without a token and answers only requests for localhost, 127.0.0.0/8 or [::1]"
	}
	return ""
}

// LoopbackHost reports whether a Host header (with or without a port)
// names localhost, an address in 127.0.0.0/8, or [::1].
func LoopbackHost(host string) bool {
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
