package conveyor

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Push endpoint defaults and bounds (see PushHandler).
const (
	// DefaultPushTolerance is how far a request's webhook-timestamp may be
	// from the endpoint's clock, either way, unless WithPushTolerance says
	// otherwise: 5 minutes, as Standard Webhooks recommends. It bounds how
	// long a captured request could be replayed, and so how long the
	// endpoint remembers the ids it accepted.
	DefaultPushTolerance = 5 * time.Minute
	// MaxPushRequestBytes bounds the body of one push request (8 MiB). A
	// task's payload is at most 1 MiB, and its metadata 64 KiB, which the
	// JSON body carries in base64 with room to spare; a larger body is
	// refused (413) before it is read whole.
	MaxPushRequestBytes = 8 << 20
)

// pushSecretEnv is the environment variable PushHandler reads its secrets
// from when no option gives them, as the server does for its own.
const pushSecretEnv = "CONVEYOR_PUSH_SECRET"

// pushReplayCapacity bounds the webhook-ids a push endpoint remembers
// (about 15 MB at most). Past it, the ids closest to their expiry are
// forgotten, and requests as old as those are refused: see replayCache.
const pushReplayCapacity = 100_000

// PushOption configures the handler PushHandler returns.
type PushOption interface {
	applyToPush(*pushConfig)
}

type pushOptionFunc func(*pushConfig)

func (f pushOptionFunc) applyToPush(c *pushConfig) { f(c) }

type pushConfig struct {
	secrets    []string // as written, whsec_...
	secretsSet bool     // WithPushSecrets was given
	source     string   // where the secrets came from, for errors
	dev        bool
	tolerance  time.Duration
	errs       []error
}

// WithPushSecrets sets the secrets that verify the server's requests, each
// written "whsec_" followed by the base64 of its key (24 to 64 bytes), as
// the server's --push-secret takes them. A request is accepted when any of
// its signatures matches any of the secrets, so a secret rotates by giving
// the endpoint the new one beside the old before the server switches, and
// dropping the old one after. Empty strings (and spaces around a secret)
// are ignored. PushHandler refuses a secret that does not decode, naming
// it by its position, never by its value. Without this option (and without
// WithPushDevelopmentMode) the secrets come from CONVEYOR_PUSH_SECRET,
// comma-separated.
func WithPushSecrets(secrets ...string) PushOption {
	return pushOptionFunc(func(c *pushConfig) {
		c.secrets = append(c.secrets, secrets...)
		c.secretsSet, c.source = true, "WithPushSecrets"
	})
}

// WithPushDevelopmentMode makes the endpoint accept requests that carry no
// webhook-signature, as a server with no push secret sends them (it then
// pushes only to loopback URLs). Such a request is not checked at all:
// anyone who can reach the endpoint can make it run any task. Use it for
// local development on a loopback address only. A signed request is still
// verified against the secrets, if WithPushSecrets gives any. Defaults to
// off: with no secret and without this option, PushHandler refuses to
// build a handler.
func WithPushDevelopmentMode() PushOption {
	return pushOptionFunc(func(c *pushConfig) { c.dev = true })
}

// WithPushTolerance sets how far a signed request's webhook-timestamp may
// be from the endpoint's clock, either way, before the request is refused
// as stale (401). It must be > 0. Defaults to DefaultPushTolerance (5
// minutes); a longer one suits clocks that are far apart, and makes the
// endpoint remember accepted ids that much longer.
func WithPushTolerance(d time.Duration) PushOption {
	return pushOptionFunc(func(c *pushConfig) {
		if d <= 0 {
			c.errs = append(c.errs, fmt.Errorf("conveyor: push tolerance must be > 0, got %s", d))
			return
		}
		c.tolerance = d
	})
}

// newPushConfig applies opts, reads the environment when they give neither
// secrets nor development mode, and decodes the secrets into keys.
func newPushConfig(opts []PushOption, getenv func(string) string) (*pushConfig, [][]byte, error) {
	c := &pushConfig{tolerance: DefaultPushTolerance}
	for _, o := range opts {
		if o != nil {
			o.applyToPush(c)
		}
	}
	if !c.secretsSet && !c.dev {
		if v := getenv(pushSecretEnv); v != "" {
			c.secrets, c.source = strings.Split(v, ","), pushSecretEnv
		}
	}
	keys, err := c.keys()
	if err != nil {
		c.errs = append(c.errs, err)
	}
	if len(c.errs) > 0 {
		return nil, nil, errors.Join(c.errs...)
	}
	if len(keys) == 0 && !c.dev {
		return nil, nil, errors.New("conveyor: a push endpoint needs a secret to verify the server's requests: " +
			"give it with WithPushSecrets or " + pushSecretEnv + " (the server's --push-secret), " +
			"or accept unsigned requests with WithPushDevelopmentMode (loopback development only)")
	}
	return c, keys, nil
}

// keys decodes the configured secrets, naming a bad one by its position.
func (c *pushConfig) keys() ([][]byte, error) {
	var keys [][]byte
	for i, s := range c.secrets {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		k, err := parsePushSecret(s)
		if err != nil {
			return nil, fmt.Errorf("conveyor: push secret %d of %d (%s): %w", i+1, len(c.secrets), c.source, err)
		}
		keys = append(keys, k)
	}
	return keys, nil
}
