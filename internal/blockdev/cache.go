package blockdev

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// Defaults for CacheOptions.
const (
	DefaultCachePageSize = 64 << 10
	DefaultCacheBudget   = 64 << 20
)

// CacheOptions configures a Cache. The zero value gives the defaults.
type CacheOptions struct {
	// PageSize is the unit of caching in bytes, a power of two of at least
	// 4096. Pages are aligned to their size on the device. Default 64 KiB,
	// which holds whole 16 KiB tree blocks and matches the stripe length.
	PageSize int
	// Budget is the most bytes of pages kept; the least recently used pages
	// go first. Default 64 MiB.
	Budget int64
	// Bypass: reads of at least this many bytes skip the cache (neither
	// served from nor added to it), so bulk data reads do not evict tree
	// blocks. 0 means 4 pages; negative means never bypass.
	Bypass int
}

// CacheStats are counters of a Cache since it was created.
type CacheStats struct {
	Hits      uint64 // page lookups served from memory
	Misses    uint64 // page lookups that read the device
	Bypassed  uint64 // reads that went straight to the device
	Evictions uint64 // pages dropped to stay within the budget
	Pages     int    // pages held now
	Bytes     int64  // bytes held now
}

// Cache is a read cache over a Device and itself a Device. Reads fill whole
// pages and keep them in LRU order within a byte budget; writes go straight
// through to the device and then update the cached pages they touch.
//
// Cached page contents are immutable once published, so readers copy from
// pages without holding the lock. A write drops the pages it touches
// rather than updating copies of them: the filesystem above keeps the tree
// blocks it writes in its own cache of verified blocks, and copying whole
// pages on every write cost more than reading back the few that are read
// again. A page read from the device is published only if no write touched
// it while it was being read (each fill in progress is marked stale by a
// write over its page), so a cache never holds bytes older than a
// completed write, while writes elsewhere on the device do not keep pages
// out of the cache.
//
// Concurrent misses on the same page may each read it from the device; the
// first one to finish publishes it.
type Cache struct {
	dev      Device // Immutable.
	pageSize int64  // Immutable.
	budget   int64  // Immutable.
	bypass   int    // Immutable; <= 0 means never.

	hits, misses, bypassed, evictions atomic.Uint64

	mu    sync.Mutex
	pages map[int64]*cachePage // by page index. Protected by mu.
	lru   cachePage            // sentinel: lru.next is the most recent. Protected by mu.
	bytes int64                // Protected by mu.
	// filling holds the fills in progress by page index; a write over the
	// page marks its fill stale. Protected by mu.
	filling map[int64]*pageFill
}

// pageFill tracks the reads of one page from the device in progress.
type pageFill struct {
	readers int  // fills of the page now reading
	stale   bool // a write touched the page since the first began
}

// cachePage is one cached page and its place in the LRU list.
type cachePage struct {
	idx        int64
	data       []byte // immutable once published
	prev, next *cachePage
}

// NewCache returns a cache over d. Closing the cache closes d.
func NewCache(d Device, opts CacheOptions) (*Cache, error) {
	ps := opts.PageSize
	if ps == 0 {
		ps = DefaultCachePageSize
	}
	if ps < 4096 || ps&(ps-1) != 0 {
		return nil, fmt.Errorf("blockdev: cache page size %d is not a power of two >= 4096", ps)
	}
	budget := opts.Budget
	if budget == 0 {
		budget = DefaultCacheBudget
	}
	if budget < 0 {
		return nil, fmt.Errorf("blockdev: negative cache budget %d", budget)
	}
	bypass := opts.Bypass
	if bypass == 0 {
		bypass = 4 * ps
	}
	c := &Cache{dev: d, pageSize: int64(ps), budget: budget, bypass: bypass, pages: make(map[int64]*cachePage),
		filling: make(map[int64]*pageFill)}
	c.lru.next, c.lru.prev = &c.lru, &c.lru
	return c, nil
}

// Device returns the device under the cache.
func (c *Cache) Device() Device { return c.dev }

// Stats returns the counters.
func (c *Cache) Stats() CacheStats {
	c.mu.Lock()
	pages, bytes := len(c.pages), c.bytes
	c.mu.Unlock()
	return CacheStats{
		Hits: c.hits.Load(), Misses: c.misses.Load(), Bypassed: c.bypassed.Load(),
		Evictions: c.evictions.Load(), Pages: pages, Bytes: bytes,
	}
}

// ReadAt implements Device.
func (c *Cache) ReadAt(p []byte, off int64) (int, error) {
	n, lim := checkRead(len(p), off, c.dev.Size())
	if n == 0 {
		return 0, lim
	}
	if c.bypass > 0 && n >= c.bypass {
		c.bypassed.Add(1)
		got, err := c.dev.ReadAt(p[:n], off)
		if err == nil {
			err = lim
		}
		return got, err
	}
	done := 0
	for done < n {
		pos := off + int64(done)
		idx, in := pos/c.pageSize, pos%c.pageSize
		data, err := c.page(idx)
		if err != nil {
			return done, err
		}
		if in >= int64(len(data)) {
			return done, fmt.Errorf("cache page %d holds %d bytes: %w", idx, len(data), errShortPage)
		}
		done += copy(p[done:n], data[in:])
	}
	return n, lim
}

// errShortPage reports a device that returned less than its size promised.
var errShortPage = errors.New("device shorter than its size")

// page returns the contents of page idx, from memory or from the device.
func (c *Cache) page(idx int64) ([]byte, error) {
	c.mu.Lock()
	if pg, ok := c.pages[idx]; ok {
		c.unlink(pg)
		c.pushFront(pg)
		data := pg.data
		c.mu.Unlock()
		c.hits.Add(1)
		return data, nil
	}
	f := c.filling[idx]
	if f == nil {
		f = &pageFill{}
		c.filling[idx] = f
	}
	f.readers++
	c.mu.Unlock()
	c.misses.Add(1)

	start := idx * c.pageSize
	n := min(c.pageSize, c.dev.Size()-start)
	data := make([]byte, n)
	got, err := c.dev.ReadAt(data, start)

	c.mu.Lock()
	defer c.mu.Unlock()
	if f.readers--; f.readers == 0 {
		delete(c.filling, idx)
	}
	if err != nil && got < len(data) {
		return nil, err
	}
	if f.stale {
		return data, nil // a write raced with the read: serve it, don't keep it
	}
	if pg, ok := c.pages[idx]; ok {
		return pg.data, nil
	}
	pg := &cachePage{idx: idx, data: data}
	c.pages[idx] = pg
	c.pushFront(pg)
	c.bytes += int64(len(data))
	c.evict()
	return data, nil
}

// evict drops least recently used pages until the budget holds.
// Preconditions: c.mu is held.
func (c *Cache) evict() {
	for c.bytes > c.budget && c.lru.prev != &c.lru {
		c.drop(c.lru.prev)
		c.evictions.Add(1)
	}
}

// drop removes pg from the cache. Preconditions: c.mu is held.
func (c *Cache) drop(pg *cachePage) {
	c.unlink(pg)
	delete(c.pages, pg.idx)
	c.bytes -= int64(len(pg.data))
}

// unlink takes pg out of the LRU list. Preconditions: c.mu is held.
func (c *Cache) unlink(pg *cachePage) {
	pg.prev.next, pg.next.prev = pg.next, pg.prev
	pg.prev, pg.next = nil, nil
}

// pushFront makes pg the most recently used. Preconditions: c.mu is held.
func (c *Cache) pushFront(pg *cachePage) {
	pg.prev, pg.next = &c.lru, c.lru.next
	c.lru.next.prev = pg
	c.lru.next = pg
}

// WriteAt implements Device: the device is written, then the cached pages
// covering the range are dropped and fills of them in progress marked
// stale.
func (c *Cache) WriteAt(p []byte, off int64) (int, error) {
	n, err := c.dev.WriteAt(p, off)
	c.Invalidate(off, int64(len(p)))
	return n, err
}

// WriteShared implements SharedWriter: the device below shares or
// writes, and the cached pages the range touches are dropped either way.
func (c *Cache) WriteShared(p []byte, off int64, src HostRange) (bool, error) {
	shared, err := WriteShared(c.dev, p, off, src)
	c.Invalidate(off, int64(len(p)))
	return shared, err
}

// Invalidate drops cached pages overlapping [off, off+n), for callers that
// changed the device behind the cache's back.
func (c *Cache) Invalidate(off, n int64) {
	if n <= 0 || off < 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	first, last := off/c.pageSize, (off+n-1)/c.pageSize
	for idx, f := range c.filling {
		if idx >= first && idx <= last {
			f.stale = true
		}
	}
	if last-first >= int64(len(c.pages)) {
		for idx, pg := range c.pages {
			if idx >= first && idx <= last {
				c.drop(pg)
			}
		}
		return
	}
	for idx := first; idx <= last; idx++ {
		if pg, ok := c.pages[idx]; ok {
			c.drop(pg)
		}
	}
}

// Purge drops every cached page.
func (c *Cache) Purge() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, f := range c.filling {
		f.stale = true
	}
	for _, pg := range c.pages {
		c.drop(pg)
	}
}

// Size implements Device.
func (c *Cache) Size() int64 { return c.dev.Size() }

// Sync implements Device.
func (c *Cache) Sync() error { return c.dev.Sync() }

// Close implements Device: it empties the cache and closes the device.
func (c *Cache) Close() error {
	c.Purge()
	return c.dev.Close()
}
