//go:build linux

package btrfstest

import (
	"testing"

	"golang.org/x/sys/unix"
)

// fileSizes are the regular-file sizes PopulateFiles creates: empty, one
// byte, inline (at or under the default max_inline of 2048), just past
// inline, one block, several blocks, and a few MiB (many extents, several
// csum items).
var fileSizes = []struct {
	name string
	size int
}{
	{"empty", 0},
	{"one", 1},
	{"inline-2000", 2000},
	{"regular-2049", 2049},
	{"block-4096", 4096},
	{"medium-300000", 300000},
	{"large-3MiB", 3<<20 + 123},
}

// PopulateFiles creates dir/files with regular files of the sizes above,
// filled with incompressible seeded data, plus a text file and a file
// written in several unaligned pieces (so its extents do not line up with
// the file's writes).
func PopulateFiles(tb testing.TB, dir string, seed int64) {
	tb.Helper()
	p := newPopulator(tb, dir, "files", seed)
	for _, fs := range fileSizes {
		p.write(fs.name, p.random(fs.size))
	}
	p.write("text", p.text(50000))
	f := p.open("pieces")
	for off := int64(0); off < 200000; off += 33333 {
		p.writeAt(f, off, p.random(20000))
	}
	p.close(f)
	p.stampTimes()
}

// PopulateExtents creates dir/extents with the file layouts that exercise
// extent handling. It needs btrfs (reflinks).
//   - sparse: data at 400 KiB and 5 MiB, holes elsewhere; sparse-tail ends in
//     a hole; hole-only is all hole.
//   - prealloc: fallocate mode 0 growing the file, then KEEP_SIZE past EOF,
//     then a write into the middle of the preallocated range;
//     prealloc-keepsize is size 0 with blocks preallocated past EOF.
//   - punched: PUNCH_HOLE|KEEP_SIZE, block-aligned and unaligned.
//   - clone-src, clone (FICLONE of all of it), partclone (FICLONERANGE of a
//     part into another file's middle), selfclone (a range cloned within
//     the same file).
func PopulateExtents(tb testing.TB, dir string, seed int64) {
	tb.Helper()
	p := newPopulator(tb, dir, "extents", seed)
	p.sparseFiles()
	p.preallocFiles()
	f := p.open("punched")
	p.writeAt(f, 0, p.random(256<<10))
	p.fallocate(f, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, 64<<10, 64<<10)
	p.fallocate(f, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, 200000, 10000)
	p.close(f)
	p.cloneFiles()
	p.stampTimes()
}

func (p *populator) sparseFiles() {
	p.tb.Helper()
	f := p.open("sparse")
	p.writeAt(f, 400<<10, p.random(10000))
	p.writeAt(f, 5<<20, p.random(5000))
	p.close(f)
	f = p.open("sparse-tail")
	p.writeAt(f, 0, p.random(8192))
	p.check(f.Truncate(1 << 20))
	p.close(f)
	f = p.open("hole-only")
	p.check(f.Truncate(300000))
	p.close(f)
}

func (p *populator) preallocFiles() {
	p.tb.Helper()
	f := p.open("prealloc")
	p.writeAt(f, 0, p.random(8192))
	p.fallocate(f, 0, 8192, 64<<10)
	p.fallocate(f, unix.FALLOC_FL_KEEP_SIZE, 8192+64<<10, 128<<10)
	p.writeAt(f, 16<<10, p.random(4096))
	p.close(f)
	f = p.open("prealloc-keepsize")
	p.fallocate(f, unix.FALLOC_FL_KEEP_SIZE, 0, 64<<10)
	p.close(f)
}

func (p *populator) cloneFiles() {
	p.tb.Helper()
	src := p.open("clone-src")
	p.writeAt(src, 0, p.random(1<<20))
	p.check(src.Sync())
	dst := p.open("clone")
	p.check(unix.IoctlFileClone(int(dst.Fd()), int(src.Fd())))
	p.close(dst)
	part := p.open("partclone")
	p.writeAt(part, 0, p.random(512<<10))
	p.check(unix.IoctlFileCloneRange(int(part.Fd()), &unix.FileCloneRange{
		Src_fd: int64(src.Fd()), Src_offset: 128 << 10, Src_length: 128 << 10, Dest_offset: 256 << 10,
	}))
	p.close(part)
	self := p.open("selfclone")
	p.writeAt(self, 0, p.random(256<<10))
	p.check(self.Sync())
	p.check(unix.IoctlFileCloneRange(int(self.Fd()), &unix.FileCloneRange{
		Src_fd: int64(self.Fd()), Src_offset: 0, Src_length: 64 << 10, Dest_offset: 128 << 10,
	}))
	p.close(self)
	p.close(src)
}

// fallocate calls fallocate(2) on an open file.
func (p *populator) fallocate(f interface{ Fd() uintptr }, mode uint32, off, n int64) {
	p.tb.Helper()
	if err := unix.Fallocate(int(f.Fd()), mode, off, n); err != nil {
		p.tb.Fatalf("fallocate(mode %#x, %d, %d): %v", mode, off, n, err)
	}
}

// compressionAlgos are the algorithms btrfs supports for the compression
// property.
var compressionAlgos = []string{"zstd", "zlib", "lzo"}

// PopulateCompressed creates dir/compressed/{zstd,zlib,lzo}, each with the
// btrfs.compression property set (so files inherit it), holding a small
// compressible file (compressed inline extent), a 600 KiB compressible file
// (several 128 KiB compressed extents), a mixed file (compressible then
// random data) and an incompressible one. It needs btrfs.
func PopulateCompressed(tb testing.TB, dir string, seed int64) {
	tb.Helper()
	p := newPopulator(tb, dir, "compressed", seed)
	for _, algo := range compressionAlgos {
		p.mkdir(algo, 0o755)
		p.setXattr(algo, "btrfs.compression", []byte(algo))
		p.write(algo+"/small", p.text(1500))
		p.write(algo+"/big", p.text(600<<10))
		p.write(algo+"/mixed", append(p.text(200<<10), p.random(100<<10)...))
		p.write(algo+"/random", p.random(64<<10))
	}
	p.stampTimes()
}
