package check

import (
	"encoding/binary"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/gobtrfs/btrfs/internal/btrfstest"
	"github.com/gobtrfs/btrfs/internal/disk"
)

// TestCheckUUIDTree: on a kernel-made filesystem with a subvolume and a
// snapshot the UUID tree matches the root items; an entry naming the
// wrong subvolume is found from both sides (the entry names a subvolume
// without that uuid, and the subvolume's uuid has no entry).
func TestCheckUUIDTree(t *testing.T) {
	btrfstest.RequireInterop(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{})
	mnt := btrfstest.Mount(t, "", img)
	for _, args := range [][]string{
		{"subvolume", "create", filepath.Join(mnt, "sub")},
		{"subvolume", "snapshot", filepath.Join(mnt, "sub"), filepath.Join(mnt, "snap")},
	} {
		if out, err := exec.Command("btrfs", args...).CombinedOutput(); err != nil {
			t.Fatalf("btrfs %v: %v\n%s", args, err, out)
		}
	}
	btrfstest.Unmount(t, mnt)

	c := openChecker(t, img)
	if c.sb.UUIDTreeGeneration != c.sb.Generation {
		t.Fatalf("uuid tree generation %d, filesystem %d: the tree would not be checked", c.sb.UUIDTreeGeneration, c.sb.Generation)
	}
	if rep := withoutStaleFreeSpaceInfo(runCheck(t, img, false)); !rep.Clean() {
		t.Fatalf("kernel image not clean:\n%s", problemsText(rep))
	}
	sub, _ := c.tree(256)
	leaf, slot := findItem(t, c, disk.UUIDTreeObjectID, func(k disk.Key, _ []byte) bool {
		return k == disk.UUIDKey(sub.item.UUID, disk.UUIDKeySubvol)
	})
	binary.LittleEndian.PutUint64(leaf.ItemData(slot), 257) // the snapshot, whose uuid differs
	writeBlock(t, c, img, leaf, true)
	rep := runCheck(t, img, false)
	if !hasProblem(rep, KindRootRef, "names subvolume 257, whose uuid is") || !hasProblem(rep, KindRootRef, "uuid tree: subvolume 256 uuid") {
		t.Fatalf("wrong uuid tree entry not found:\n%s", problemsText(rep))
	}
	if btrfstest.CheckStatus(t, img) == 0 {
		t.Logf("btrfs check calls the damaged uuid tree clean")
	}
}
