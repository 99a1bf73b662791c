package conveyor

import "time"

// GatheredForTest reports how many Enqueue calls of c wait in its gathering
// batch, so that tests can wait for calls to gather instead of sleeping.
func GatheredForTest(c *Client) int {
	if c.batcher == nil {
		return 0
	}
	c.batcher.mu.Lock()
	defer c.batcher.mu.Unlock()
	if g := c.batcher.gathering; g != nil {
		return g.live
	}
	return 0
}

// SetEnqueueLingerForTest makes c's batcher linger for d after every
// shared RPC, whatever its round trip, so that tests do not depend on how
// fast goroutines come back.
func SetEnqueueLingerForTest(c *Client, d time.Duration) {
	c.batcher.mu.Lock()
	defer c.batcher.mu.Unlock()
	c.batcher.lingerFor = func(time.Duration) time.Duration { return d }
}

// SetClockSkewForTest makes w compare the server's times with a wall clock
// d ahead of the host's (behind, for a negative d), as a worker on a host
// whose clock is off would. Call it before Run.
func SetClockSkewForTest(w *Worker, d time.Duration) { w.wallSkew = d }
