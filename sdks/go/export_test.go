package conveyor

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
