package chunk_test

import (
	"testing"

	"github.com/gobtrfs/btrfs/internal/disk"
)

// BenchmarkReadFullStripes reads a whole RAID6 chunk (every device
// healthy): the path must do no per-byte work and allocate nothing.
func BenchmarkReadFullStripes(b *testing.B) {
	s := cachedSynth(b, "raid6", 6, 8)
	r := s.reader()
	buf := make([]byte, s.item.Length)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		if err := r.ReadLogical(buf, s.start, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRebuildTwoMissing reads the same chunk with two devices gone,
// so half the pieces need a P+Q rebuild.
func BenchmarkRebuildTwoMissing(b *testing.B) {
	s := cachedSynth(b, "raid6", 6, 8)
	r := s.reader(disk.DevID(1), disk.DevID(4))
	buf := make([]byte, s.item.Length)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		if err := r.ReadLogical(buf, s.start, nil); err != nil {
			b.Fatal(err)
		}
	}
}
