package txn_test

import (
	"math/rand"
	"os"
	"testing"

	"github.com/gobtrfs/btrfs/internal/btrfstest"
	"github.com/gobtrfs/btrfs/internal/disk"
	"github.com/gobtrfs/btrfs/internal/txn"
)

// TestTreeStats: the FS counts the engine per tree across transactions,
// its commits and the bytes it wrote to the device; with the shortcut
// switched off no tree takes it.
func TestTreeStats(t *testing.T) {
	img := btrfstest.Mkfs(t, formats[0].opts)
	rng := rand.New(rand.NewSource(seed(t)))
	fs, err := txn.Open([]string{img})
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	fs.SetNoPushRightShortcut(true)
	have := map[string][]byte{}
	for range 3 {
		tx, err := fs.Begin()
		if err != nil {
			t.Fatal(err)
		}
		fsTree, err := tx.Tree(disk.FSTreeObjectID)
		if err != nil {
			t.Fatal(err)
		}
		if !fsTree.Options().NoPushRightShortcut {
			t.Fatal("tree opened with the shortcut on")
		}
		addXattrs(t, tx, fsTree, rng, 150, have)
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	if got := fs.Commits(); got != 3 {
		t.Errorf("commits %d, want 3", got)
	}
	st, err := os.Stat(img)
	if err != nil {
		t.Fatal(err)
	}
	nodesize := int64(fs.Super().NodeSize)
	if w := fs.BytesWritten(); w < 3*nodesize || w > st.Size() {
		t.Errorf("bytes written %d, image %d bytes", w, st.Size())
	}
	trees := fs.TreeStats()
	f := trees[disk.FSTreeObjectID]
	if f.SplitLeaf == 0 || f.PushLeafRight == 0 || f.BlocksWritten == 0 || f.BlocksCowed == 0 {
		t.Errorf("fs tree counters %+v", f)
	}
	for _, id := range []disk.ObjectID{disk.RootTreeObjectID, disk.ExtentTreeObjectID} {
		if trees[id].BlocksWritten < 3 {
			t.Errorf("tree %s wrote %d blocks in 3 commits", id.TreeName(), trees[id].BlocksWritten)
		}
	}
	for id, s := range trees {
		if s.PushLeafRightShortcut != 0 {
			t.Errorf("tree %s took the shortcut %d times with it off", id.TreeName(), s.PushLeafRightShortcut)
		}
	}
	btrfstest.Check(t, []string{img}, false)
}
