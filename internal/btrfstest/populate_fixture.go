//go:build linux

package btrfstest

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// PopulateFixture creates the small tree of the committed fixture images
// directly in dir (not in a subdirectory): a few files (empty, inline,
// regular, sparse), a symlink, a dangling symlink, hardlinks across
// directories, xattrs in three namespaces and an ACL, a fifo, a socket,
// device nodes, setuid and non-root owners, and nanosecond mtimes. With
// onBtrfs (dir is on a kernel btrfs mount) it adds what only btrfs can
// hold: zstd, zlib and lzo compressed files (inline and regular), a
// preallocated file, a reflink, a subvolume and a read-only snapshot taken
// before the subvolume was changed. Without onBtrfs, dir may be on any
// filesystem with xattrs, as a source for mkfs.btrfs --rootdir.
//
// It stays small (about 100 KiB of incompressible data) so the images
// compress to little.
func PopulateFixture(tb testing.TB, dir string, seed int64, onBtrfs bool) {
	tb.Helper()
	p := newPopulator(tb, dir, "", seed)
	p.write("empty", nil)
	p.write("inline", p.text(500))
	p.write("regular", p.random(12288+7))
	f := p.open("sparse")
	p.writeAt(f, 0, p.random(4096))
	p.writeAt(f, 256<<10, p.random(4096))
	p.check(f.Truncate(300 << 10))
	p.close(f)
	p.symlink("regular", "symlink")
	p.symlink("nowhere/at/all", "dangling")
	p.mkdir("a", 0o755)
	p.mkdir("b", 0o755)
	p.write("a/linked", p.random(3000))
	p.link("a/linked", "b/linked-too")
	p.setXattr("inline", "user.comment", []byte("a user xattr"))
	p.setXattr("inline", "trusted.t", p.random(20))
	p.setXattr("inline", "security.s", []byte("sec"))
	p.setXattr("regular", "system.posix_acl_access", posixACL(0o6, 0o4, 0o6, 0o4, 1000, 0o6))
	p.mknod("fifo", unix.S_IFIFO, 0o644, 0, 0)
	p.socket("socket")
	p.mknod("null", unix.S_IFCHR, 0o666, 1, 3)
	p.mknod("sda1", unix.S_IFBLK, 0o660, 8, 1)
	p.write("setuid", p.random(100))
	p.check(os.Lchown(p.path("setuid"), 1000, 1000))
	p.check(unix.Chmod(p.path("setuid"), 0o4755))
	if onBtrfs {
		p.fixtureBtrfsOnly()
	}
	p.stampTimes()
	if onBtrfs {
		p.snapshot("sv", "sv-snap", true)
		p.write("sv/after-snapshot", p.text(200))
		p.check(os.Remove(p.path("sv/file")))
	}
}

// fixtureBtrfsOnly adds the parts of PopulateFixture that need btrfs.
func (p *populator) fixtureBtrfsOnly() {
	p.tb.Helper()
	p.mkdir("compressed", 0o755)
	for _, algo := range compressionAlgos {
		d := "compressed/" + algo
		p.mkdir(d, 0o755)
		p.setXattr(d, "btrfs.compression", []byte(algo))
		p.write(d+"/inline", p.text(1000))
		p.write(d+"/big", p.text(160<<10))
	}
	f := p.open("prealloc")
	p.writeAt(f, 0, p.random(4096))
	p.fallocate(f, unix.FALLOC_FL_KEEP_SIZE, 4096, 64<<10)
	p.close(f)
	src, dst := p.open("regular"), p.open("reflink")
	p.check(unix.IoctlFileClone(int(dst.Fd()), int(src.Fd())))
	p.close(dst)
	p.close(src)
	p.subvolume("sv")
	p.write("sv/file", p.random(5000))
	p.write("sv/kept", p.text(3000))
}
