package btrfs

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/gobtrfs/btrfs/internal/btrfstest"
	"github.com/gobtrfs/btrfs/internal/disk"
)

// copyFixture decompresses a fixture and returns a private copy's path.
func copyFixture(t *testing.T, name string) string {
	return btrfstest.OpenFixture(t, name)
}

// physical returns every device offset holding logical (one per copy).
func physical(t *testing.T, fsys *FS, logical disk.LogicalAddr) []int64 {
	mp, err := fsys.chunks.Mirrors(logical, 1)
	if err != nil {
		t.Fatal(err)
	}
	var out []int64
	for _, l := range mp.Copies {
		out = append(out, int64(l.Physical))
	}
	return out
}

// xorAt flips the byte at off in the image file.
func xorAt(t *testing.T, path string, off int64) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x5a
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// fileExtentStart returns the logical address of the first data extent of
// the named file.
func fileExtentStart(t *testing.T, fsys *FS, name string) disk.LogicalAddr {
	in, err := fsys.walk("test", name, false)
	if err != nil {
		t.Fatal(err)
	}
	exts, err := fsys.loadExtents(in)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range exts {
		if e.fe.Type == disk.FileExtentReg && e.fe.DiskBytenr != 0 {
			return e.fe.DiskBytenr + disk.LogicalAddr(e.fe.Offset)
		}
	}
	t.Fatalf("%s has no regular extent", name)
	return 0
}

func TestDamagedDataIsReportedAndLocal(t *testing.T) {
	img := copyFixture(t, "rootdir-16k-crc32c")
	fsys, err := Open(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	logical := fileExtentStart(t, fsys, "regular")
	offs := physical(t, fsys, logical)
	fsys.Close()
	if len(offs) != 1 {
		t.Fatalf("data has %d copies; the fixture's data is single", len(offs))
	}
	xorAt(t, img, offs[0]+100)

	fsys, err = Open(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	_, err = fsys.ReadFile("regular")
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("reading damaged file: %v, want ErrCorrupt", err)
	}
	for _, want := range []string{"regular", "checksum mismatch", "logical"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	// Other files still read.
	if _, err := fsys.ReadFile("a/linked"); err != nil {
		t.Errorf("undamaged file: %v", err)
	}
}

func TestDamagedMetadataCopyFallsBack(t *testing.T) {
	img := copyFixture(t, "rootdir-16k-crc32c")
	fsys, err := Open(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	root := fsys.top.root.Addr
	offs := physical(t, fsys, root)
	fsys.Close()
	if len(offs) != 2 {
		t.Fatalf("fs tree root has %d copies; the fixture's metadata is DUP", len(offs))
	}
	// One bad copy: the other serves.
	xorAt(t, img, offs[0]+200)
	fsys, err = Open(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fsys.ReadFile("regular"); err != nil {
		t.Errorf("with one good metadata copy: %v", err)
	}
	fsys.Close()
	// Both bad: the error names the block and the tree.
	xorAt(t, img, offs[1]+200)
	_, err = Open(img, nil)
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("open with both copies of the fs root bad: %v, want ErrCorrupt", err)
	}
	for _, want := range []string{"FS_TREE", "checksum mismatch"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
}

func TestTruncatedAndForeignImages(t *testing.T) {
	img := copyFixture(t, "rootdir-16k-crc32c")
	// A file that is not btrfs.
	other := filepath.Join(t.TempDir(), "zeros")
	if err := os.WriteFile(other, make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(other, nil); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "magic") {
		t.Errorf("open zeros: %v, want a bad-magic ErrCorrupt", err)
	}
	// Truncated: the superblock survives, the trees do not.
	if err := os.Truncate(img, 20<<20); err != nil {
		t.Fatal(err)
	}
	_, err := Open(img, nil)
	if err == nil {
		t.Fatal("open of a truncated image succeeded")
	}
	if !strings.Contains(err.Error(), img) {
		t.Errorf("error %q does not name the image", err)
	}
}

func TestTreeLoopIsCaught(t *testing.T) {
	img := copyFixture(t, "rootdir-16k-crc32c")
	fsys, err := Open(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Make the root tree's root block claim to be a node whose only child
	// is itself, with a valid checksum: the reader must refuse it by level.
	root := fsys.rootTree.Addr
	offs := physical(t, fsys, root)
	sb := fsys.superblock()
	fsys.Close()
	f, err := os.OpenFile(img, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, off := range offs {
		blk := make([]byte, sb.NodeSize)
		if _, err := f.ReadAt(blk, off); err != nil {
			t.Fatal(err)
		}
		blk[0x64] = 1 // level
		disk.PutKeyPtr(blk, 0, disk.KeyPtr{Key: disk.Key{}, BlockPtr: root, Generation: sb.Generation})
		blk[0x60], blk[0x61], blk[0x62], blk[0x63] = 1, 0, 0, 0
		sb.CsumType.SumBlock(blk)
		if _, err := f.WriteAt(blk, off); err != nil {
			t.Fatal(err)
		}
	}
	f.Close()
	_, err = Open(img, nil)
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("open with a self-referencing root: %v, want ErrCorrupt", err)
	}
}

// fsNocowFl is FS_NOCOW_FL of linux/fs.h (chattr +C), which x/sys lacks.
const fsNocowFl = 0x00800000

// TestInteropDataMirrorFallbackAndNodatasum: a data sector damaged in one
// DUP copy is read from the other; damaged in both it is an error naming
// the place; a NODATASUM (nocow) file is read without checksums, as the
// kernel reads it.
func TestInteropDataMirrorFallbackAndNodatasum(t *testing.T) {
	btrfstest.RequireInterop(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{DataProfile: "dup", MetadataProfile: "dup"})
	mnt := btrfstest.Mount(t, "", img)
	want := make([]byte, 256<<10)
	for i := range want {
		want[i] = byte(i*7 + i>>9)
	}
	if err := os.WriteFile(filepath.Join(mnt, "dup"), want, 0o644); err != nil {
		t.Fatal(err)
	}
	nocow := filepath.Join(mnt, "nocow")
	f, err := os.Create(nocow)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.IoctlSetPointerInt(int(f.Fd()), unix.FS_IOC_SETFLAGS, fsNocowFl); err != nil {
		t.Fatalf("chattr +C: %v", err)
	}
	if _, err := f.Write(want[:64<<10]); err != nil {
		t.Fatal(err)
	}
	f.Close()
	btrfstest.Unmount(t, mnt)

	fsys, err := Open(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	dupCopies := physical(t, fsys, fileExtentStart(t, fsys, "dup")+8192)
	nocowCopies := physical(t, fsys, fileExtentStart(t, fsys, "nocow"))
	st, _ := fsys.Lstat("nocow")
	if st.Sys().(*Stat).Flags&uint64(disk.InodeNoDataSum) == 0 {
		t.Fatalf("nocow file flags %#x lack NODATASUM", st.Sys().(*Stat).Flags)
	}
	fsys.Close()
	if len(dupCopies) != 2 {
		t.Fatalf("data has %d copies, want 2 (DUP)", len(dupCopies))
	}

	read := func(name string) ([]byte, error) {
		fsys, err := Open(img, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer fsys.Close()
		return fsys.ReadFile(name)
	}
	xorAt(t, img, dupCopies[0]+10)
	if got, err := read("dup"); err != nil || !bytes.Equal(got, want) {
		t.Errorf("one bad copy: err %v, contents equal %v; want the other copy's bytes", err, bytes.Equal(got, want))
	}
	xorAt(t, img, dupCopies[1]+10)
	if _, err := read("dup"); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "checksum mismatch") {
		t.Errorf("both copies bad: %v, want a checksum ErrCorrupt", err)
	}
	// NODATASUM: no checksum to catch the damage, so the damaged bytes are
	// read back, as the kernel would.
	for _, off := range nocowCopies {
		xorAt(t, img, off+5)
	}
	got, err := read("nocow")
	if err != nil {
		t.Fatalf("nocow read: %v", err)
	}
	if bytes.Equal(got, want[:64<<10]) || !bytes.Equal(got[6:], want[6:64<<10]) {
		t.Errorf("nocow file: want exactly the damaged byte changed")
	}
}
