package push

import (
	"fmt"
	"net"
	"net/url"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
)

// Defaults and bounds of an endpoint's settings (CONTRACT.md, "Push
// endpoints").
const (
	// DefaultConcurrency is the invocations in flight when the queue's
	// push.concurrency is 0.
	DefaultConcurrency = 10
	// DefaultTimeout bounds one invocation when push.timeout is 0.
	DefaultTimeout = 30 * time.Second
	// MaxConcurrency bounds push.concurrency: each invocation holds a
	// connection and a goroutine.
	MaxConcurrency = 1000
	// MaxTimeout bounds push.timeout: serverless platforms cap a request
	// well below it (Cloud Run at 60 minutes, Lambda at 15).
	MaxTimeout = time.Hour
	// MaxURLBytes bounds push.url.
	MaxURLBytes = 2048
)

// Settings are an endpoint's settings with the defaults applied.
type Settings struct {
	URL         string
	Concurrency int
	Timeout     time.Duration
}

// SettingsOf applies the defaults to a queue's stored endpoint.
func SettingsOf(e broker.PushEndpoint) Settings {
	s := Settings{URL: e.URL, Concurrency: int(e.Concurrency), Timeout: e.Timeout}
	if s.Concurrency <= 0 {
		s.Concurrency = DefaultConcurrency
	}
	if s.Timeout <= 0 {
		s.Timeout = DefaultTimeout
	}
	return s
}

// Check validates an endpoint as a queue's configuration gives it; field
// prefixes the names in its errors. Without a secret (loopbackOnly) only
// loopback URLs are accepted: an unsigned request to another host could be
// forged by anyone who reaches it, and an operator who may configure a
// queue could aim the server at an internal address (SSRF).
func Check(field string, e broker.PushEndpoint, loopbackOnly bool) error {
	if e.Concurrency < 0 || e.Concurrency > MaxConcurrency {
		return fmt.Errorf("%s.concurrency must be 0..%d (0 means %d), got %d", field, MaxConcurrency, DefaultConcurrency, e.Concurrency)
	}
	if e.Timeout < 0 || e.Timeout > MaxTimeout {
		return fmt.Errorf("%s.timeout must be 0..%s (0 means %s), got %s", field, MaxTimeout, DefaultTimeout, e.Timeout)
	}
	if e.URL == "" {
		return nil
	}
	return CheckURL(field+".url", e.URL, loopbackOnly)
}

// CheckURL validates an endpoint's URL: absolute http or https, a host, no
// credentials (they would show in ListWorkers) and no fragment.
func CheckURL(field, raw string, loopbackOnly bool) error {
	if len(raw) > MaxURLBytes {
		return fmt.Errorf("%s is %d bytes, over the bound of %d", field, len(raw), MaxURLBytes)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("%s %q is not a URL: %w", field, raw, err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("%s %q must be an http:// or https:// URL", field, raw)
	case u.Host == "" || u.Hostname() == "":
		return fmt.Errorf("%s %q has no host", field, raw)
	case u.User != nil:
		return fmt.Errorf("%s %q must not carry credentials: the server signs its requests instead", field, raw)
	case u.Fragment != "" || u.RawFragment != "":
		return fmt.Errorf("%s %q must not have a fragment", field, raw)
	}
	if loopbackOnly && !isLoopbackHost(u.Hostname()) {
		return fmt.Errorf("%s %q is not a loopback URL (localhost, 127.0.0.0/8, [::1]): a server with no push secret "+
			"(--push-secret, CONVEYOR_PUSH_SECRET) pushes only to loopback, since its requests are unsigned", field, raw)
	}
	return nil
}

// isLoopbackHost reports whether host is localhost or a loopback address.
func isLoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
