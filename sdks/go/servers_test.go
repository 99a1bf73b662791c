package conveyor_test

import (
	"crypto/tls"
	"net"
	"strings"
	"testing"

	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
)

// TestServersAddressChecked: an address naming several servers is checked
// URL by URL, by NewClient and NewWorker alike; an error names the URL at
// fault and its place in the list. Schemes may differ; a server named twice,
// however it is written, is refused.
func TestServersAddressChecked(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		addr string
		want string // "" for an address accepted
	}{
		{"http://127.0.0.1:7420", ""},
		{"http://a:7420,http://b:7420", ""},
		{" http://a:7420 , https://b:7420 ", ""},           // spaces trimmed; schemes may differ
		{"http://a:7420,https://a:7420", ""},               // two schemes, two servers
		{"http://a:7420/conveyor,http://a:7420/other", ""}, // two path prefixes, two servers
		{"127.0.0.1:7420", `address "127.0.0.1:7420" must be an http:// or https:// URL`},
		{"", `address "" must be an http:// or https:// URL`},
		{"http://a:7420,,http://b:7420", `address "http://a:7420,,http://b:7420": server 2 of 3 is empty`},
		{"http://a:7420,", `server 2 of 2 is empty`},
		{"http://a:7420,b:7420", `address "b:7420" (server 2 of 2) must be an http:// or https:// URL`},
		{"ftp://a,http://b:7420", `address "ftp://a" (server 1 of 2) must be an http:// or https:// URL`},
		{"http://a:7420,http://", `address "http://" (server 2 of 2) must be an http:// or https:// URL`},
		{"http://a:7420,http://b:7420,http://A:7420/", `address "http://A:7420/" (server 3 of 3) names the same server as server 1`},
		{"http://a,http://a:80", `address "http://a:80" (server 2 of 2) names the same server as server 1`},
		{"https://a:443,https://a", `(server 2 of 2) names the same server as server 1`},
	} {
		_, err := conveyor.NewClient(tc.addr)
		checkAddrErr(t, "NewClient", tc.addr, err, tc.want)
		_, err = conveyor.NewWorker(tc.addr)
		checkAddrErr(t, "NewWorker", tc.addr, err, tc.want)
	}
}

func checkAddrErr(t *testing.T, fn, addr string, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Errorf("%s(%q): %v, want it accepted", fn, addr, err)
	case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
		t.Errorf("%s(%q): %v, want an error saying %q", fn, addr, err, want)
	}
}

// TestServersTLSConfigNeedsAnHTTPSServer: WithTLSConfig applies to the
// https:// servers of a list, so a list with one is fine; a list of http://
// servers only would leave it unused, and is refused.
func TestServersTLSConfigNeedsAnHTTPSServer(t *testing.T) {
	t.Parallel()
	tlsCfg := conveyor.WithTLSConfig(&tls.Config{MinVersion: tls.VersionTLS12})
	if _, err := conveyor.NewClient("http://a:7420,https://b:7420", tlsCfg); err != nil {
		t.Errorf("a TLS config with one https:// server: %v", err)
	}
	_, err := conveyor.NewClient("http://a:7420,http://b:7420", tlsCfg)
	if err == nil || !strings.Contains(err.Error(), "every address is http://, which does not use TLS") {
		t.Errorf("a TLS config with http:// servers only: %v", err)
	}
}

// deadURL is the URL of a loopback port nothing listens on: a connection
// to it is refused.
func deadURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return "http://" + addr
}
