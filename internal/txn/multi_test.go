package txn_test

import (
	"math/rand"
	"testing"

	"github.com/gobtrfs/btrfs/internal/btrfstest"
	"github.com/gobtrfs/btrfs/internal/disk"
	"github.com/gobtrfs/btrfs/internal/txn"
)

// TestCommitMultiDevice commits on a two-device filesystem with RAID1
// metadata: every block goes to both devices, every device gets its own
// superblocks.
func TestCommitMultiDevice(t *testing.T) {
	btrfstest.RequireInterop(t)
	rng := rand.New(rand.NewSource(seed(t)))
	devs := btrfstest.MkfsMulti(t, btrfstest.MkfsOptions{NumDevices: 2, MetadataProfile: "raid1", DataProfile: "single"})
	want := map[string][]byte{}
	for i := 0; i < 3; i++ {
		fs, err := txn.Open(devs)
		if err != nil {
			t.Fatal(err)
		}
		tx, err := fs.Begin()
		if err != nil {
			t.Fatal(err)
		}
		fsTree, err := tx.Tree(disk.FSTreeObjectID)
		if err != nil {
			t.Fatal(err)
		}
		touchTop(t, tx, fsTree)
		addXattrs(t, tx, fsTree, rng, 100, want)
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		if err := fs.Close(); err != nil {
			t.Fatal(err)
		}
		btrfstest.Check(t, devs, false)
	}
	checkXattrsDevs(t, devs, want)
}
