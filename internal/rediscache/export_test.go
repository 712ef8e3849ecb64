package rediscache

// Queued counts the invalidations waiting for the next bump round (for
// the package's external tests).
func Queued(c *Cache) int {
	c.bumpMu.Lock()
	defer c.bumpMu.Unlock()
	n := 0
	for _, w := range c.bumpQueue {
		n += len(w)
	}
	return n
}
