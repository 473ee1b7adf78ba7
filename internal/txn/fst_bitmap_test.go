package txn_test

import (
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gobtrfs/btrfs/internal/btrfstest"
	"github.com/gobtrfs/btrfs/internal/disk"
	"github.com/gobtrfs/btrfs/internal/txn"
)

// inTxn runs fn in one transaction on img and commits it.
func inTxn(t *testing.T, img string, fn func(tx *txn.Txn)) {
	t.Helper()
	fs, err := txn.Open([]string{img})
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	tx, err := fs.Begin()
	if err != nil {
		t.Fatal(err)
	}
	fn(tx)
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// TestFSTBitmaps fragments the metadata group until the free-space tree
// must switch to bitmaps, as the kernel would, and checks that btrfs check
// and the kernel accept the bitmaps and that later commits keep them right.
func TestFSTBitmaps(t *testing.T) {
	btrfstest.RequireInterop(t)
	rng := rand.New(rand.NewSource(seed(t)))
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{NodeSize: 4096})
	have := map[string][]byte{}
	// One 2.5 KiB xattr per 4K leaf: 400 leaves in a row.
	inTxn(t, img, func(tx *txn.Txn) { addBigXattrs(t, tx, rng, 400, 2500, have) })
	if n := dumpCount(t, img, "free_space", "flags 1"); n != 0 {
		t.Fatalf("bitmaps before fragmenting: %d groups", n)
	}
	// Dropping every other item empties every other leaf: ~200 free runs.
	names := make([]string, 0, len(have))
	for name := range have {
		names = append(names, name)
	}
	slices.SortFunc(names, func(a, b string) int {
		ha, hb := disk.NameHash([]byte(a)), disk.NameHash([]byte(b))
		switch {
		case ha < hb:
			return -1
		case ha > hb:
			return 1
		}
		return 0
	})
	inTxn(t, img, func(tx *txn.Txn) {
		fsTree, err := tx.Tree(disk.FSTreeObjectID)
		if err != nil {
			t.Fatal(err)
		}
		touchTop(t, tx, fsTree)
		for i, name := range names {
			if i%2 == 1 {
				continue
			}
			k := disk.Key{ObjectID: disk.FirstFreeInode, Type: disk.XattrItemKey, Offset: disk.NameHash([]byte(name))}
			if _, err := fsTree.DeleteItem(tx.Trans(), k); err != nil {
				t.Fatal(err)
			}
			delete(have, name)
		}
	})
	// The frees are pinned in that commit; the next one sees them.
	inTxn(t, img, func(tx *txn.Txn) { addBigXattrs(t, tx, rng, 1, 100, have) })
	n := dumpCount(t, img, "free_space", "flags 1")
	t.Logf("%d block groups use bitmaps", n)
	if n == 0 {
		t.Fatal("no group switched to bitmaps after fragmenting")
	}
	btrfstest.Check(t, []string{img}, false)
	checkXattrs(t, img, have)

	// The kernel works on the bitmaps, and so do we afterwards.
	dir := btrfstest.Mount(t, "", img)
	for i := range 50 {
		if err := os.Mkdir(filepath.Join(dir, "k"+string(rune('a'+i%26))+string(rune('a'+i/26))), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	btrfstest.Unmount(t, dir)
	btrfstest.Check(t, []string{img}, false)
	inTxn(t, img, func(tx *txn.Txn) { addBigXattrs(t, tx, rng, 300, 2500, have) })
	btrfstest.Check(t, []string{img}, false)
	checkXattrs(t, img, have)
}
