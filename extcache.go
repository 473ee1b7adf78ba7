package btrfs

import (
	"container/list"
	"sync"

	"github.com/gobtrfs/btrfs/internal/disk"
)

// extentKey names a disk extent.
type extentKey struct {
	bytenr disk.LogicalAddr
	len    uint64
}

// extentCache keeps the decoded bytes of recently read compressed extents,
// so that reading a compressed file in small pieces decodes each extent
// once. Safe for concurrent use.
type extentCache struct {
	mu    sync.Mutex
	lru   *list.List // of *extentEntry, most recent first
	index map[extentKey]*list.Element
	bytes int
	max   int
}

type extentEntry struct {
	key  extentKey
	data []byte
}

func newExtentCache(maxBytes int) *extentCache {
	return &extentCache{lru: list.New(), index: make(map[extentKey]*list.Element), max: maxBytes}
}

func (c *extentCache) get(k extentKey) []byte {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.index[k]; ok {
		c.lru.MoveToFront(el)
		return el.Value.(*extentEntry).data
	}
	return nil
}

func (c *extentCache) put(k extentKey, data []byte) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.index[k]; ok {
		return
	}
	c.index[k] = c.lru.PushFront(&extentEntry{k, data})
	c.bytes += len(data)
	for c.bytes > c.max && c.lru.Len() > 1 {
		old := c.lru.Back()
		e := old.Value.(*extentEntry)
		c.lru.Remove(old)
		delete(c.index, e.key)
		c.bytes -= len(e.data)
	}
}

// clear forgets every extent.
func (c *extentCache) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lru.Init()
	clear(c.index)
	c.bytes = 0
}
