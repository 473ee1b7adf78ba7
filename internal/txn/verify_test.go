package txn

import (
	"crypto/sha256"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/gobtrfs/btrfs/internal/btrfstest"
	"github.com/gobtrfs/btrfs/internal/disk"
)

// fileHash returns the SHA-256 of a whole file.
func fileHash(t *testing.T, path string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}

// fsTreeLeafCopies opens img, finds the fs tree's root block (a leaf in a
// fresh image) and returns its logical address and the device offsets of
// every copy of it.
func fsTreeLeafCopies(t *testing.T, img string) (disk.LogicalAddr, []int64) {
	t.Helper()
	fs, err := Open([]string{img})
	if err != nil {
		t.Fatalf("open undamaged image: %v", err)
	}
	defer fs.Close()
	ri, _, err := fs.rootItem(disk.FSTreeObjectID)
	if err != nil {
		t.Fatal(err)
	}
	if ri.Level != 0 {
		t.Fatalf("fs tree root level %d, want a leaf", ri.Level)
	}
	return ri.Bytenr, copiesOf(t, fs, ri.Bytenr)
}

// copiesOf returns the device offsets of every copy of the block at addr.
func copiesOf(t *testing.T, fs *FS, addr disk.LogicalAddr) []int64 {
	t.Helper()
	mp, err := fs.chunks.Mirrors(addr, 1)
	if err != nil {
		t.Fatal(err)
	}
	var offs []int64
	for _, l := range mp.Copies {
		offs = append(offs, int64(l.Physical))
	}
	return offs
}

// wantCorruptAt fails unless err wraps disk.ErrCorrupt and names tree and
// block addr.
func wantCorruptAt(t *testing.T, err error, tree disk.ObjectID, addr disk.LogicalAddr) {
	t.Helper()
	if !errors.Is(err, disk.ErrCorrupt) {
		t.Errorf("error does not wrap disk.ErrCorrupt: %v", err)
		return
	}
	msg := err.Error()
	if !strings.Contains(msg, tree.TreeName()) || !strings.Contains(msg, strconv.FormatUint(uint64(addr), 10)) {
		t.Errorf("error %q does not name tree %s and block %d", msg, tree.TreeName(), addr)
	}
}

// flipByte xors one byte of a file.
func flipByte(t *testing.T, path string, off int64) {
	t.Helper()
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

// TestDamageFoundWhenMet damages the fs tree leaf in both DUP copies. Open
// does not read the fs tree, so it opens; a transaction that changes the
// fs tree meets the damage and fails with ErrCorrupt naming the tree and
// block, and aborting it leaves the image as it was. A transaction that
// does not read the damaged block commits.
func TestDamageFoundWhenMet(t *testing.T) {
	btrfstest.RequireInterop(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{MetadataProfile: "dup"})
	addr, offs := fsTreeLeafCopies(t, img)
	if len(offs) != 2 {
		t.Fatalf("fs tree leaf has %d copies, want 2 (DUP)", len(offs))
	}
	// Undamaged, it opens, and opening changes nothing.
	before := fileHash(t, img)
	fs, err := Open([]string{img})
	if err != nil {
		t.Fatalf("open undamaged image: %v", err)
	}
	if err := fs.Close(); err != nil {
		t.Fatal(err)
	}
	if fileHash(t, img) != before {
		t.Fatal("opening an undamaged image changed it")
	}

	for _, off := range offs {
		flipByte(t, img, off+200) // in the item area, past the header
	}
	before = fileHash(t, img)
	fs, err = Open([]string{img})
	if err != nil {
		t.Fatalf("open of an image whose fs tree is damaged (not read at open): %v", err)
	}
	defer fs.Close()
	tx, err := fs.Begin()
	if err != nil {
		t.Fatal(err)
	}
	fsTree, err := tx.Tree(disk.FSTreeObjectID)
	if err == nil {
		key := disk.Key{ObjectID: disk.FirstFreeInode, Type: disk.XattrItemKey, Offset: 1}
		err = fsTree.InsertItem(tx.Trans(), key, make([]byte, 40))
	}
	if err == nil {
		err = tx.Commit()
	} else {
		tx.Abort()
	}
	if err == nil {
		t.Fatal("a change to the damaged fs tree leaf succeeded")
	}
	t.Logf("refused: %v", err)
	wantCorruptAt(t, err, disk.FSTreeObjectID, addr)
	if fileHash(t, img) != before {
		t.Fatal("a refused change changed the image")
	}
	// A transaction that never reads the fs tree commits.
	tx, err = fs.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatalf("commit not touching the damaged block: %v", err)
	}
}

// TestOpenRefusesDamagedRootTree damages the root tree's root block in
// both DUP copies: the root tree is read whole at open, so Open refuses
// with ErrCorrupt naming the tree and block, and changes nothing.
func TestOpenRefusesDamagedRootTree(t *testing.T) {
	btrfstest.RequireInterop(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{MetadataProfile: "dup"})
	fs, err := Open([]string{img})
	if err != nil {
		t.Fatalf("open undamaged image: %v", err)
	}
	addr := fs.sb.Root
	offs := copiesOf(t, fs, addr)
	fs.Close()
	for _, off := range offs {
		flipByte(t, img, off+200)
	}
	before := fileHash(t, img)
	fs, err = Open([]string{img})
	if err == nil {
		fs.Close()
		t.Fatal("open of an image with a damaged root tree succeeded")
	}
	t.Logf("refused: %v", err)
	wantCorruptAt(t, err, disk.RootTreeObjectID, addr)
	if fileHash(t, img) != before {
		t.Fatal("refused open changed the image")
	}
}

// TestOpenOneBadCopy damages only one DUP copy: the other is good, so the
// filesystem is intact and opens.
func TestOpenOneBadCopy(t *testing.T) {
	btrfstest.RequireInterop(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{MetadataProfile: "dup"})
	_, offs := fsTreeLeafCopies(t, img)
	flipByte(t, img, offs[0]+200)
	fs, err := Open([]string{img})
	if err != nil {
		t.Fatalf("open with one good copy: %v", err)
	}
	fs.Close()
}
