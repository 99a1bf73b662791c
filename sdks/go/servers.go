package conveyor

import (
	"fmt"
	"net/url"
	"strings"
)

// serverSeparator separates the URLs of an address that names several
// servers (see NewClient). A comma cannot begin or end a URL's host, and a
// URL that needs one in its path writes it %2C.
const serverSeparator = ","

// parseServers splits addr into the URLs of the servers it names, in
// order, and checks each: an http:// or https:// URL with a host, named
// once. Schemes may differ from one URL to the next. An error names the
// URL at fault and, when addr names several, its position.
func parseServers(addr string) ([]*url.URL, error) {
	parts := strings.Split(addr, serverSeparator)
	urls := make([]*url.URL, 0, len(parts))
	seen := make(map[string]int, len(parts)) // serverKey -> 1-based position
	for i, part := range parts {
		where := ""
		if len(parts) > 1 {
			where = fmt.Sprintf(" (server %d of %d)", i+1, len(parts))
		}
		part = strings.TrimSpace(part)
		if part == "" && len(parts) > 1 {
			return nil, fmt.Errorf("conveyor: address %q: server %d of %d is empty", addr, i+1, len(parts))
		}
		u, err := url.Parse(part)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("conveyor: address %q%s must be an http:// or https:// URL", part, where)
		}
		key := serverKey(u)
		if first, dup := seen[key]; dup {
			return nil, fmt.Errorf("conveyor: address %q%s names the same server as server %d: list each server once", part, where, first)
		}
		seen[key] = i + 1
		urls = append(urls, u)
	}
	return urls, nil
}

// serverKey is what two URLs of one server have in common, however they
// are written: scheme and host in lower case, the scheme's default port
// made explicit, and the path without its trailing slashes (the SDK
// appends the procedure's path to it).
func serverKey(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	return u.Scheme + "://" + strings.ToLower(u.Hostname()) + ":" + port + strings.TrimRight(u.EscapedPath(), "/")
}
