package metricsauth

import (
	"sync"
	"time"
)

// ttlCache is a map whose entries expire, holding at most maxEntries. When full, its expired
// entries are dropped, then, if none had expired, the one that would expire first: a flood of
// new keys costs reviews and evicts entries of its own cache, never unbounded memory.
type ttlCache[V any] struct {
	mu      sync.Mutex
	now     func() time.Time
	entries map[string]ttlEntry[V]
}

type ttlEntry[V any] struct {
	value   V
	expires time.Time
}

func newTTLCache[V any](now func() time.Time) *ttlCache[V] {
	return &ttlCache[V]{now: now, entries: map[string]ttlEntry[V]{}}
}

func (c *ttlCache[V]) get(key string) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	if !ok || !c.now().Before(e.expires) {
		var zero V
		return zero, false
	}
	return e.value, true
}

func (c *ttlCache[V]) put(key string, value V, ttl time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if _, ok := c.entries[key]; !ok && len(c.entries) >= maxEntries {
		first := ""
		var firstExpires time.Time
		for k, e := range c.entries {
			if !now.Before(e.expires) {
				delete(c.entries, k)
			} else if first == "" || e.expires.Before(firstExpires) {
				first, firstExpires = k, e.expires
			}
		}
		if len(c.entries) >= maxEntries {
			delete(c.entries, first)
		}
	}
	c.entries[key] = ttlEntry[V]{value: value, expires: now.Add(ttl)}
}
