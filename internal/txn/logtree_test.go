package txn

import (
	"strings"
	"testing"

	"github.com/gobtrfs/btrfs/internal/btrfstest"
	"github.com/gobtrfs/btrfs/internal/ctree"
	"github.com/gobtrfs/btrfs/internal/disk"
)

// TestLogTreeOpen: a filesystem with a log opens with the log's blocks
// pinned and its data extents held; a commit that did not replay the log
// is refused, one that did drops it and frees the log's blocks.
func TestLogTreeOpen(t *testing.T) {
	img := btrfstest.OpenFixture(t, "log-new-files")
	fs, err := Open([]string{img})
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	trees := fs.LogTrees()
	if len(trees) != 1 || trees[0].Subvol != disk.FSTreeObjectID {
		t.Fatalf("log trees %+v, want one for the top-level subvolume", trees)
	}
	var blocks []disk.LogicalAddr
	sb := fs.Super()
	for _, r := range []ctree.Root{{Addr: sb.LogRoot, Level: int(sb.LogRootLevel), Owner: disk.TreeLogObjectID}, trees[0].Root} {
		if err := fs.walkLog(r, &blocks, func(disk.Key, []byte) {}); err != nil {
			t.Fatal(err)
		}
	}
	for _, a := range blocks {
		if !fs.Space().Pinned().Contains(uint64(a), uint64(a)+uint64(sb.NodeSize)) {
			t.Errorf("log block %d not pinned", a)
		}
	}
	if len(fs.log.data) == 0 {
		t.Error("no logged data extent held (the fixture writes new files)")
	}

	tx, err := fs.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err == nil || !strings.Contains(err.Error(), "not replayed") {
		t.Fatalf("commit without replay: %v", err)
	}
	if fs.Super().LogRoot == 0 {
		t.Fatal("refused commit dropped the log")
	}

	tx, err = fs.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.ClaimLoggedData(); err != nil {
		t.Fatal(err)
	}
	tx.LogReplayed() // pretend: the data claimed and not referenced goes back
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if fs.Super().LogRoot != 0 || fs.LogTrees() != nil {
		t.Fatal("log still there after the commit that replayed it")
	}
	for _, a := range blocks {
		if fs.Space().Pinned().Overlaps(uint64(a), uint64(a)+uint64(sb.NodeSize)) {
			t.Errorf("log block %d still pinned after the commit", a)
		}
	}
	if err := fs.Close(); err != nil {
		t.Fatal(err)
	}
	btrfstest.Check(t, []string{img}, false)
}
