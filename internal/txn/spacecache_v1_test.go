package txn_test

import (
	"bytes"
	"os"
	"testing"

	"github.com/gobtrfs/btrfs/internal/alloc"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
	"github.com/gobtrfs/btrfs/internal/disk"
	"github.com/gobtrfs/btrfs/internal/txn"
)

// TestSpaceCacheV1ConvertTxn opens a filesystem mkfs.btrfs made without
// the free-space tree (cache_generation -1: the v1 cache requested). An
// aborted transaction writes nothing; the first commit creates the
// free-space tree, equal to the extent tree's view of every group, and
// sets compat_ro FREE_SPACE_TREE and FREE_SPACE_TREE_VALID with
// cache_generation 0; btrfs check is clean and later commits keep the
// tree in step. (The removal of the kernel's cache files is tested on
// kernel-made images in the root package.)
func TestSpaceCacheV1ConvertTxn(t *testing.T) {
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{Extra: []string{"-R", "^free-space-tree"}})
	orig, err := os.ReadFile(img)
	if err != nil {
		t.Fatal(err)
	}
	fs, err := txn.Open([]string{img})
	if err != nil {
		t.Fatalf("open a v1 space cache filesystem: %v", err)
	}
	defer fs.Close()
	if sb := fs.Super(); sb.CompatROFlags&disk.CompatROFreeSpaceTree != 0 || sb.CacheGeneration == 0 {
		t.Fatalf("mkfs.btrfs -R ^free-space-tree: compat_ro %#x, cache generation %d", sb.CompatROFlags, sb.CacheGeneration)
	}

	tx, err := fs.Begin()
	if err != nil {
		t.Fatal(err)
	}
	ft, err := tx.Tree(disk.FSTreeObjectID)
	if err != nil {
		t.Fatal(err)
	}
	touchTop(t, tx, ft)
	tx.Abort()
	if now, err := os.ReadFile(img); err != nil || !bytes.Equal(now, orig) {
		t.Fatalf("an aborted transaction changed the image (read error %v)", err)
	}

	for i := range 3 {
		tx, err := fs.Begin()
		if err != nil {
			t.Fatal(err)
		}
		ft, err := tx.Tree(disk.FSTreeObjectID)
		if err != nil {
			t.Fatal(err)
		}
		touchTop(t, tx, ft)
		if err := tx.Commit(); err != nil {
			t.Fatalf("commit %d: %v", i, err)
		}
		sb := fs.Super()
		const want = disk.CompatROFreeSpaceTree | disk.CompatROFreeSpaceTreeValid
		if sb.CompatROFlags&want != want || sb.CacheGeneration != 0 {
			t.Fatalf("commit %d: compat_ro %#x, cache generation %d", i, sb.CompatROFlags, sb.CacheGeneration)
		}
		compareFST(t, fs)
	}
	if err := fs.Close(); err != nil {
		t.Fatal(err)
	}
	btrfstest.Check(t, []string{img}, false)
	fs2, err := txn.Open([]string{img})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	compareFST(t, fs2)
	fs2.Close()
}

// compareFST checks the committed free-space tree against the free-space
// model the FS keeps from the extent tree.
func compareFST(t *testing.T, fs *txn.FS) {
	t.Helper()
	tx, err := fs.Begin()
	if err != nil {
		t.Fatal(err)
	}
	ft, err := tx.Tree(disk.FreeSpaceTreeObjectID)
	if err != nil {
		t.Fatalf("free space tree: %v", err)
	}
	root := ft.Root()
	tx.Abort()
	f, err := alloc.LoadFreeSpaceTree(fs, root, fs.Super().SectorSize)
	if err != nil {
		t.Fatal(err)
	}
	if err := fs.Space().CompareFreeSpaceTree(f); err != nil {
		t.Fatalf("free space tree against the extent tree: %v", err)
	}
}
