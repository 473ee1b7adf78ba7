package btrfs_test

import (
	"bytes"
	"errors"
	"io"
	"math/rand"
	"syscall"
	"testing"
	"time"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
	"github.com/gobtrfs/btrfs/internal/disk"
	"github.com/gobtrfs/btrfs/internal/fsview"
)

// kernelDataFiles are the regular files of the kernel fixture with one
// name each, in the top-level subvolume: kernel-made inline, compressed,
// shared, preallocated and sparse extents.
var kernelDataFiles = []string{
	"compressed/lzo/big", "compressed/lzo/inline", "compressed/zlib/big", "compressed/zlib/inline",
	"compressed/zstd/big", "compressed/zstd/inline", "empty", "inline", "prealloc", "reflink",
	"regular", "setuid", "sparse",
}

func openFixtureWritable(t *testing.T, opts *btrfs.Options) (string, *btrfs.FS) {
	t.Helper()
	img := btrfstest.OpenFixture(t, "kernel-16k-crc32c")
	fsys, err := btrfs.OpenWritable(img, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fsys.Close() })
	return img, fsys
}

func statOf(t *testing.T, fsys *btrfs.FS, name string) *btrfs.Stat {
	t.Helper()
	fi, err := fsys.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*btrfs.Stat)
}

// TestDataOnKernelFixture runs random data changes over files the kernel
// wrote (inline, compressed, reflinked, preallocated, sparse), commits,
// and reads everything back through a fresh read-only open. With
// btrfs-progs present, btrfs check (with data checksums) must be clean.
func TestDataOnKernelFixture(t *testing.T) {
	seed := *dataSeed
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	t.Logf("seed %d (replay: -data-seed %d)", seed, seed)
	for _, comp := range []string{"", "zstd"} {
		t.Run("compress="+comp, func(t *testing.T) {
			img, fsys := openFixtureWritable(t, &btrfs.Options{Compress: comp})
			growDataSpace(t, fsys, 10<<20)
			m := &dataModel{t: t, fsys: fsys, rng: rand.New(rand.NewSource(seed)), ss: int(fsys.SectorSize()), files: map[string]*dataFile{}, small: true}
			for _, name := range kernelDataFiles {
				b, err := fsys.ReadFile(name)
				if err != nil {
					t.Fatal(name, err)
				}
				f := &dataFile{b: b, nsum: statOf(t, fsys, name).Flags&uint64(disk.InodeNoDataSum) != 0}
				f.setSize(len(b), m.ss)
				loadDataMap(t, fsys, name, f, m.ss)
				m.files[name] = f
			}
			for round := range 3 {
				for i := range 40 {
					m.step(round*1000 + i)
				}
				m.compareFS(fsys, "before commit")
				m.must(fsys.Commit(), "commit")
				m.compareFS(fsys, "after commit")
			}
			m.must(fsys.Close(), "close")
			ro, err := btrfs.Open(img, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer ro.Close()
			m.compareFS(ro, "fresh open")
			if btrfstest.Interop() {
				btrfstest.Check(t, []string{img}, true)
			}
		})
	}
}

// loadDataMap sets the model's data sectors of a file the kernel wrote
// from SEEK_DATA through the read path.
func loadDataMap(t *testing.T, fsys *btrfs.FS, name string, f *dataFile, ss int) {
	fd, err := fsys.OpenFile(name)
	if err != nil {
		t.Fatal(err)
	}
	defer fd.Close()
	for s := range f.data {
		d, err := fd.SeekDataAt(int64(s * ss))
		f.data[s] = err == nil && d < int64(min((s+1)*ss, len(f.b)))
	}
}

func wantErrno(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Errorf("%s: %v, want %v", what, err, want)
	}
}

// TestDataErrors checks the errno of refused data operations, which
// change nothing.
func TestDataErrors(t *testing.T) {
	_, fsys := openFixtureWritable(t, nil)
	_, err := fsys.WriteAt("a", []byte("x"), 0)
	wantErrno(t, "WriteAt dir", err, syscall.EISDIR)
	_, err = fsys.WriteAt("missing", []byte("x"), 0)
	wantErrno(t, "WriteAt missing", err, syscall.ENOENT)
	_, err = fsys.WriteAt("symlink", []byte("x"), 0)
	wantErrno(t, "WriteAt symlink", err, syscall.EINVAL)
	_, err = fsys.WriteAt("regular", []byte("x"), -1)
	wantErrno(t, "WriteAt negative", err, syscall.EINVAL)
	wantErrno(t, "WriteFile dir", fsys.WriteFile("a", nil, 0o644), syscall.EISDIR)
	wantErrno(t, "WriteFile under file", fsys.WriteFile("regular/x", nil, 0o644), syscall.ENOTDIR)
	wantErrno(t, "Truncate negative", fsys.Truncate("regular", -1), syscall.EINVAL)
	wantErrno(t, "Truncate dir", fsys.Truncate("a", 0), syscall.EISDIR)
	wantErrno(t, "PunchHole zero length", fsys.PunchHole("regular", 0, 0), syscall.EINVAL)
	wantErrno(t, "Fallocate fifo", fsys.Fallocate("fifo", 0, 4096, false), syscall.EINVAL)
	wantErrno(t, "Clone unaligned src", fsys.Clone("regular", 1, "empty", 0, 4096), syscall.EINVAL)
	wantErrno(t, "Clone unaligned dst", fsys.Clone("regular", 0, "empty", 512, 4096), syscall.EINVAL)
	wantErrno(t, "Clone unaligned length", fsys.Clone("regular", 0, "empty", 0, 100), syscall.EINVAL)
	wantErrno(t, "Clone past src end", fsys.Clone("regular", 0, "empty", 0, 16384), syscall.EINVAL)
	wantErrno(t, "Clone overlapping self", fsys.Clone("regular", 0, "regular", 4096, 8192), syscall.EINVAL)
	wantErrno(t, "SetInodeFlags unknown", fsys.SetInodeFlags("regular", 1<<20, 0), syscall.EINVAL)
	wantErrno(t, "SetInodeFlags set and clear", fsys.SetInodeFlags("regular", 1, 1), syscall.EINVAL)
	wantErrno(t, "NODATASUM on data", fsys.SetInodeFlags("regular", uint64(disk.InodeNoDataSum), 0), syscall.EINVAL)
	// chattr +a: appends only; chattr +i: nothing.
	if err := fsys.SetInodeFlags("setuid", uint64(disk.InodeAppend), 0); err != nil {
		t.Fatal(err)
	}
	_, err = fsys.WriteAt("setuid", []byte("x"), 0)
	wantErrno(t, "WriteAt append-only not at end", err, syscall.EPERM)
	wantErrno(t, "Truncate append-only", fsys.Truncate("setuid", 0), syscall.EPERM)
	if _, err := fsys.WriteAt("setuid", []byte("tail"), 100); err != nil {
		t.Errorf("append to an append-only file: %v", err)
	}
	if err := fsys.SetInodeFlags("inline", uint64(disk.InodeImmutable), 0); err != nil {
		t.Fatal(err)
	}
	_, err = fsys.WriteAt("inline", []byte("x"), 500)
	wantErrno(t, "WriteAt immutable", err, syscall.EPERM)
	wantErrno(t, "WriteFile immutable", fsys.WriteFile("inline", nil, 0), syscall.EPERM)
	wantErrno(t, "Clone into immutable", fsys.Clone("regular", 0, "inline", 0, 4096), syscall.EPERM)
	b, err := fsys.ReadFile("regular")
	if err != nil || len(b) != 12295 {
		t.Fatalf("regular after refused changes: %d %v", len(b), err)
	}
}

// TestDataSemantics checks sizes, nbytes, flags and holes of data
// operations against what the kernel produces (format doc §5.5, §9.3).
func TestDataSemantics(t *testing.T) {
	img, fsys := openFixtureWritable(t, nil)
	semanticsSizes(t, fsys)
	semanticsPrealloc(t, fsys)
	semanticsFlagsClone(t, fsys)
	used := fsview.Of(fsys).Superblock().BytesUsed
	mustOK(t, fsys.Remove("pre"))
	mustOK(t, fsys.Remove("src"))
	mustOK(t, fsys.Remove("dst"))
	mustOK(t, fsys.Commit())
	if after := fsview.Of(fsys).Superblock().BytesUsed; after+(1<<20) > used {
		t.Errorf("bytes used %d -> %d after removing 1 MiB prealloc and a shared 128 KiB", used, after)
	}
	mustOK(t, fsys.Close())
	if btrfstest.Interop() {
		btrfstest.Check(t, []string{img}, true)
	}
}

func mustOK(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// semanticsSizes: inline and regular sizes and nbytes, growth, truncation.
func semanticsSizes(t *testing.T, fsys *btrfs.FS) {
	must := func(err error) { t.Helper(); mustOK(t, err) }
	must(fsys.WriteFile("six", []byte("hello\n"), 0o644))
	if st := statOf(t, fsys, "six"); st.Size != 6 || st.NBytes != 6 {
		t.Errorf("6-byte file: size %d nbytes %d (inline wants 6, 6)", st.Size, st.NBytes)
	}
	big := bytes.Repeat([]byte{1, 2, 3}, 100000)
	must(fsys.WriteFile("big", big, 0o600))
	if st := statOf(t, fsys, "big"); st.Size != 300000 || st.NBytes != 303104 {
		t.Errorf("300000-byte file: size %d nbytes %d, want 303104", st.Size, st.NBytes)
	}
	// Growing an inline file past a sector makes it regular.
	_, err := fsys.WriteAt("six", []byte("x"), 8192)
	must(err)
	if st := statOf(t, fsys, "six"); st.Size != 8193 || st.NBytes != 8192 {
		t.Errorf("six grown: size %d nbytes %d, want 8193 and 8192 (hole in the middle)", st.Size, st.NBytes)
	}
	got, err := fsys.ReadFile("six")
	must(err)
	want := make([]byte, 8193)
	copy(want, "hello\n")
	want[8192] = 'x'
	if !bytes.Equal(got, want) {
		t.Error("six grown: content")
	}
	f, err := fsys.OpenFile("six")
	must(err)
	if h, err := f.SeekHoleAt(0); err != nil || h != 4096 {
		t.Errorf("six: SEEK_HOLE 0 = %d %v, want 4096", h, err)
	}
	// Punching a whole file leaves no data, size kept.
	must(fsys.PunchHole("big", 0, 300000))
	if st := statOf(t, fsys, "big"); st.Size != 300000 || st.NBytes != 0 {
		t.Errorf("punched: size %d nbytes %d", st.Size, st.NBytes)
	}
	// Truncating mid-sector zeroes the rest of the sector.
	must(fsys.WriteFile("tail", bytes.Repeat([]byte{0xff}, 10000), 0o644))
	must(fsys.Truncate("tail", 5000))
	must(fsys.Truncate("tail", 9000))
	got, err = fsys.ReadFile("tail")
	must(err)
	if !bytes.Equal(got[:5000], bytes.Repeat([]byte{0xff}, 5000)) || !bytes.Equal(got[5000:], make([]byte, 4000)) {
		t.Error("truncate down then up: the bytes past the old end are not zero")
	}
}

// semanticsPrealloc: unwritten, counted in nbytes, a hole for SEEK_DATA.
func semanticsPrealloc(t *testing.T, fsys *btrfs.FS) {
	must := func(err error) { t.Helper(); mustOK(t, err) }
	must(fsys.CreateEmpty("pre", 0o644))
	must(fsys.Fallocate("pre", 0, 1<<20, false))
	st := statOf(t, fsys, "pre")
	if st.Size != 1<<20 || st.NBytes != 1<<20 || st.Flags&uint64(disk.InodePrealloc) == 0 {
		t.Errorf("fallocated: size %d nbytes %d flags %#x", st.Size, st.NBytes, st.Flags)
	}
	_, err := fsys.WriteAt("pre", []byte("data"), 65536)
	must(err)
	if st := statOf(t, fsys, "pre"); st.NBytes != 1<<20 {
		t.Errorf("written into prealloc: nbytes %d, want %d", st.NBytes, 1<<20)
	}
	f, err := fsys.OpenFile("pre")
	must(err)
	if d, err := f.SeekDataAt(0); err != nil || d != 65536 {
		t.Errorf("pre: SEEK_DATA 0 = %d %v, want 65536", d, err)
	}
}

// semanticsFlagsClone: NODATACOW rules and a reflink; commits.
func semanticsFlagsClone(t *testing.T, fsys *btrfs.FS) {
	must := func(err error) { t.Helper(); mustOK(t, err) }
	// NODATACOW: only on an empty file, and it brings NODATASUM.
	before := statOf(t, fsys, "regular").Flags
	must(fsys.SetInodeFlags("regular", uint64(disk.InodeNoDataCow), 0))
	if statOf(t, fsys, "regular").Flags != before {
		t.Error("NODATACOW changed a non-empty file's flags")
	}
	must(fsys.CreateEmpty("nocow", 0o644))
	must(fsys.SetInodeFlags("nocow", uint64(disk.InodeNoDataCow), 0))
	both := uint64(disk.InodeNoDataCow | disk.InodeNoDataSum)
	if fl := statOf(t, fsys, "nocow").Flags; fl&both != both {
		t.Errorf("nocow flags %#x", fl)
	}
	wantErrno(t, "clone across NODATASUM", fsys.Clone("regular", 0, "nocow", 0, 4096), syscall.EINVAL)
	// A reflink: dst reads src's bytes at its offset.
	pattern := bytes.Repeat([]byte("0123456789abcdef"), 8192)
	must(fsys.WriteFile("src", pattern, 0o644))
	must(fsys.CreateEmpty("dst", 0o644))
	must(fsys.Clone("src", 0, "dst", 4096, 0))
	got, err := fsys.ReadFile("dst")
	must(err)
	if len(got) != 4096+len(pattern) || !bytes.Equal(got[4096:], pattern) {
		t.Error("clone: dst content")
	}
	must(fsys.Commit())
}

// TestDataCompressionPolicy checks compressed sizes and the NOCOMPRESS
// rule: data the kernel's heuristic passes but that does not compress
// marks the file, unless forced; data the heuristic turns away (random
// bytes) is stored as is and marks nothing, as in the kernel.
func TestDataCompressionPolicy(t *testing.T) {
	rnd := make([]byte, 256<<10)
	rand.New(rand.NewSource(7)).Read(rnd)
	// Each 64 KiB repeated once: the heuristic's sample repeats, so it
	// says try, but zlib's 32 KiB window finds nothing to reuse.
	rep := append(append([]byte(nil), rnd[:64<<10]...), rnd[:64<<10]...)
	rep = append(rep, rep...)
	text := bytes.Repeat([]byte("compressible text "), 20000)
	for _, force := range []bool{false, true} {
		img, fsys := openFixtureWritable(t, &btrfs.Options{Compress: "zlib", CompressForce: force})
		for name, data := range map[string][]byte{"rnd": rnd, "rep": rep, "text": text, "small": text[:3000]} {
			if err := fsys.WriteFile(name, data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if statOf(t, fsys, "rnd").Flags&uint64(disk.InodeNoCompress) != 0 {
			t.Errorf("force %v: random data (heuristic: not worth trying) marked NOCOMPRESS", force)
		}
		fl := statOf(t, fsys, "rep").Flags & uint64(disk.InodeNoCompress)
		if force == (fl != 0) {
			t.Errorf("force %v: NOCOMPRESS on data that was tried and did not compress = %v", force, fl != 0)
		}
		if statOf(t, fsys, "text").Flags&uint64(disk.InodeNoCompress) != 0 {
			t.Error("compressible file marked NOCOMPRESS")
		}
		if st := statOf(t, fsys, "small"); st.NBytes != 3000 {
			t.Errorf("3000 compressible bytes: nbytes %d, want 3000 (compressed inline)", st.NBytes)
		}
		if err := fsys.Commit(); err != nil {
			t.Fatal(err)
		}
		for name, want := range map[string][]byte{"rnd": rnd, "rep": rep, "text": text, "small": text[:3000]} {
			got, err := fsys.ReadFile(name)
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("%s after commit: %v", name, err)
			}
		}
		fsys.Close()
		if btrfstest.Interop() {
			btrfstest.Check(t, []string{img}, true)
		}
	}
}

// TestDataCompressionFeatureFlag: writing zstd extents sets the
// COMPRESS_ZSTD incompat bit, as the kernel does.
func TestDataCompressionFeatureFlag(t *testing.T) {
	img := btrfstest.OpenFixture(t, "rootdir-16k-crc32c") // made without compression
	fsys, err := btrfs.OpenWritable(img, &btrfs.Options{Compress: "zstd"})
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	if fsview.Of(fsys).Superblock().IncompatFlags&disk.IncompatCompressZstd != 0 {
		t.Fatal("fixture already has COMPRESS_ZSTD")
	}
	if err := fsys.WriteFile("z", bytes.Repeat([]byte("zstd "), 50000), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Commit(); err != nil {
		t.Fatal(err)
	}
	fsys.Close()
	ro, err := btrfs.Open(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if fsview.Of(ro).Superblock().IncompatFlags&disk.IncompatCompressZstd == 0 {
		t.Error("COMPRESS_ZSTD not set after writing zstd extents")
	}
}

// failingReader yields n bytes of 'r', then err.
type failingReader struct {
	n   int
	err error
}

func (r *failingReader) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, r.err
	}
	k := min(len(p), r.n)
	for i := range k {
		p[i] = 'r'
	}
	r.n -= k
	return k, nil
}

// TestDataWriteFromError: a reader failing mid-stream leaves what came
// before written and reports the count with the reader's error.
func TestDataWriteFromError(t *testing.T) {
	_, fsys := openFixtureWritable(t, nil)
	boom := errors.New("boom")
	n, err := fsys.WriteFrom("empty", &failingReader{n: 12345, err: boom}, 100)
	if n != 12345 || !errors.Is(err, boom) {
		t.Fatalf("WriteFrom = %d, %v; want 12345, boom", n, err)
	}
	got, err := fsys.ReadFile("empty")
	if err != nil {
		t.Fatal(err)
	}
	want := append(make([]byte, 100), bytes.Repeat([]byte("r"), 12345)...)
	if !bytes.Equal(got, want) {
		t.Fatalf("content after a failed stream: %d bytes", len(got))
	}
	if _, err := fsys.WriteFrom("missing", &failingReader{n: 1, err: io.EOF}, 0); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("WriteFrom to a missing file: %v", err)
	}
}
