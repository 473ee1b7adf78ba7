//go:build linux

package btrfstest

import (
	"errors"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// PopulateOptions selects the optional, slow or state-changing parts of
// PopulateAll. The zero value populates everything except the big
// directory and the default-subvolume change.
type PopulateOptions struct {
	// BigDir adds PopulateBigDir (10,000 entries by default); slow, so tests
	// usually set it to !testing.Short().
	BigDir bool
	// BigDirEntries overrides the number of entries of the big directory.
	BigDirEntries int
	// SetDefault makes PopulateSubvolumes set a nested subvolume as the
	// default subvolume; a later mount then needs "subvolid=5" to see the
	// whole filesystem.
	SetDefault bool
}

// PopulateAll fills dir, the root of a mounted btrfs, through the kernel
// with every kind of content the read path must handle. Each part lands in
// its own top-level directory (files, extents, compressed, special, links,
// xattrs, names, modes, subvols, bigdir), and every part derives its own
// random stream from seed, so the result is a deterministic function of
// (seed, opts) and parts can also be used alone.
func PopulateAll(tb testing.TB, dir string, seed int64, opts PopulateOptions) {
	tb.Helper()
	PopulateFiles(tb, dir, seed)
	PopulateExtents(tb, dir, seed)
	PopulateCompressed(tb, dir, seed)
	PopulateSpecial(tb, dir, seed)
	PopulateLinks(tb, dir, seed)
	PopulateXattrs(tb, dir, seed)
	PopulateNames(tb, dir, seed)
	PopulateModes(tb, dir, seed)
	PopulateSubvolumes(tb, dir, seed, opts.SetDefault)
	if opts.BigDir {
		n := opts.BigDirEntries
		if n == 0 {
			n = 10000
		}
		PopulateBigDir(tb, dir, seed, n)
	}
}

// populator carries the test, a base directory and a random stream through
// one Populate function, and turns every error into a test failure.
type populator struct {
	tb   testing.TB
	base string
	rng  *rand.Rand
}

// newPopulator creates dir/sub (unless sub is "", meaning dir itself) and a
// random stream private to this part (the part name is mixed into the seed
// so parts are independent).
func newPopulator(tb testing.TB, dir, sub string, seed int64) *populator {
	tb.Helper()
	var salt uint64
	for _, c := range sub {
		salt = salt*131 + uint64(c)
	}
	p := &populator{tb: tb, base: filepath.Join(dir, sub), rng: rand.New(rand.NewPCG(uint64(seed), salt))}
	if sub != "" {
		p.mkdir("", 0o755)
	}
	return p
}

// path joins rel (slash-separated) to the base directory.
func (p *populator) path(rel string) string {
	if rel == "" {
		return p.base
	}
	return p.base + "/" + rel
}

func (p *populator) check(err error) {
	p.tb.Helper()
	if err != nil {
		p.tb.Fatal(err)
	}
}

// mkdir creates a directory with exactly perm (the umask does not apply).
func (p *populator) mkdir(rel string, perm os.FileMode) {
	p.tb.Helper()
	p.check(os.Mkdir(p.path(rel), perm))
	p.check(os.Chmod(p.path(rel), perm))
}

// write creates rel (mode 0644) or truncates it, and writes data.
func (p *populator) write(rel string, data []byte) {
	p.tb.Helper()
	f := p.openFlags(rel, os.O_TRUNC)
	_, err := f.Write(data)
	p.check(err)
	p.close(f)
}

// open opens rel read-write, creating it with mode 0644 if needed.
func (p *populator) open(rel string) *os.File {
	p.tb.Helper()
	return p.openFlags(rel, 0)
}

// openFlags is open with extra open flags. A created file gets mode 0644
// whatever the umask; an existing file keeps its mode (and ACL).
func (p *populator) openFlags(rel string, extra int) *os.File {
	p.tb.Helper()
	f, err := os.OpenFile(p.path(rel), os.O_RDWR|os.O_CREATE|os.O_EXCL|extra, 0o644)
	if errors.Is(err, fs.ErrExist) {
		f, err = os.OpenFile(p.path(rel), os.O_RDWR|extra, 0)
		p.check(err)
		return f
	}
	p.check(err)
	p.check(f.Chmod(0o644))
	return f
}

// mknod creates a device node, fifo or socket node with exactly perm.
func (p *populator) mknod(rel string, typ, perm uint32, major, minor uint32) {
	p.tb.Helper()
	p.check(unix.Mknod(p.path(rel), typ|perm, int(unix.Mkdev(major, minor))))
	p.check(unix.Chmod(p.path(rel), perm))
}

// writeAt writes data at off in the open file.
func (p *populator) writeAt(f *os.File, off int64, data []byte) {
	p.tb.Helper()
	_, err := f.WriteAt(data, off)
	p.check(err)
}

func (p *populator) close(f *os.File) {
	p.tb.Helper()
	p.check(f.Close())
}

// random returns n pseudo-random (incompressible) bytes.
func (p *populator) random(n int) []byte {
	b := make([]byte, n+8)
	for i := 0; i < n; i += 8 {
		v := p.rng.Uint64()
		for j := range 8 {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	return b[:n]
}

// words is the vocabulary of text; compressible data is random sentences.
var words = strings.Fields(`btrfs copy on write tree leaf node extent chunk
device subvolume snapshot inode directory checksum generation transaction
root key item data metadata block group balance scrub send receive`)

// text returns n bytes of compressible text.
func (p *populator) text(n int) []byte {
	var b strings.Builder
	for b.Len() < n {
		b.WriteString(words[p.rng.IntN(len(words))])
		if p.rng.IntN(12) == 0 {
			b.WriteString(".\n")
		} else {
			b.WriteByte(' ')
		}
	}
	return []byte(b.String()[:n])
}

// setTimes sets atime and mtime (nanosecond precision) of rel without
// following a symlink.
func (p *populator) setTimes(rel string, mtimeNs int64) {
	p.tb.Helper()
	ts := []unix.Timespec{unix.NsecToTimespec(mtimeNs), unix.NsecToTimespec(mtimeNs)}
	p.check(unix.UtimesNanoAt(unix.AT_FDCWD, p.path(rel), ts, unix.AT_SYMLINK_NOFOLLOW))
}

// setXattr sets an extended attribute on rel (not following a symlink).
func (p *populator) setXattr(rel, name string, value []byte) {
	p.tb.Helper()
	if err := unix.Lsetxattr(p.path(rel), name, value, 0); err != nil {
		p.tb.Fatalf("setxattr %s %s (%d bytes): %v", p.path(rel), name, len(value), err)
	}
}

// mtime returns a deterministic timestamp with a non-zero nanosecond part,
// somewhere in 2001-2033.
func (p *populator) mtime() int64 {
	return 1_000_000_000_000_000_000 + p.rng.Int64N(1_000_000_000_000_000_000)
}
