package conveyor

import (
	"math/rand/v2"
	"time"
)

// Reconnect backoff defaults, the protocol's reference values (§5.9).
const (
	// DefaultReconnectBase is the ceiling of the first reconnect delay.
	DefaultReconnectBase = 500 * time.Millisecond
	// DefaultReconnectMax caps every reconnect delay.
	DefaultReconnectMax = 30 * time.Second
)

// backoff is exponential backoff with full jitter: the delay before
// reconnect attempt n (0-based) is uniform in [0, min(max, base*2^n)).
// Full jitter spreads a fleet of workers that lost the same server over the
// whole window, so a restarted server is not hit by all of them at once.
// The caller resets n to 0 once a session is established (Welcome), so a
// flapping connection does not ratchet the delay up to the ceiling.
type backoff struct {
	base, max time.Duration
}

// delay returns the wait before attempt n.
func (b backoff) delay(n int) time.Duration {
	ceiling := b.ceiling(n)
	if ceiling <= 0 {
		return 0
	}
	return rand.N(ceiling)
}

// ceiling is min(max, base*2^n), computed without overflow.
func (b backoff) ceiling(n int) time.Duration {
	if b.base <= 0 || b.max <= 0 {
		return 0
	}
	if n < 0 {
		n = 0
	}
	if n < 62 && b.base <= b.max>>uint(n) {
		return b.base << uint(n)
	}
	return b.max
}
