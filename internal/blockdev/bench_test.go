package blockdev_test

import (
	"testing"

	"github.com/gobtrfs/btrfs/internal/blockdev"
)

// BenchmarkCacheHit reads a 16 KiB block that is cached.
func BenchmarkCacheHit(b *testing.B) {
	c, _ := blockdev.NewCache(blockdev.NewMem(1<<20), blockdev.CacheOptions{})
	buf := make([]byte, 16384)
	c.ReadAt(buf, 16384)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		c.ReadAt(buf, 16384)
	}
}

// BenchmarkCacheMiss reads 16 KiB blocks through a cache too small to keep
// any of them.
func BenchmarkCacheMiss(b *testing.B) {
	c, _ := blockdev.NewCache(blockdev.NewMem(64<<20), blockdev.CacheOptions{Budget: 1})
	buf := make([]byte, 16384)
	b.SetBytes(int64(len(buf)))
	off := int64(0)
	for b.Loop() {
		c.ReadAt(buf, off)
		off = (off + 1<<16) % (64 << 20)
	}
}
