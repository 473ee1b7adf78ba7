package btrfs_test

import (
	"errors"
	"fmt"
	"io/fs"
	"testing"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

func TestTreeName(t *testing.T) {
	for id, want := range map[uint64]string{1: "root", 2: "extent", 3: "chunk", 4: "dev", 5: "fs", 7: "csum",
		9: "uuid", 10: "free_space", 256: "subvol 256", 1<<64 - 9: "data_reloc", 1<<64 - 6: "tree_log"} {
		if got := btrfs.TreeName(id); got != want {
			t.Errorf("TreeName(%d) = %q, want %q", id, got, want)
		}
	}
}

// TestWriteCounters: after data writes and commits the counters name the
// trees written, every push_leaf_right is accounted for by one reason,
// and with the shortcut off none is taken.
func TestWriteCounters(t *testing.T) {
	for _, off := range []bool{false, true} {
		t.Run(fmt.Sprintf("shortcut-off=%v", off), func(t *testing.T) {
			img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{NodeSize: 4096})
			fsys, err := btrfs.OpenWritable(img, &btrfs.Options{NoPushRightShortcut: off})
			if err != nil {
				t.Fatal(err)
			}
			defer fsys.Close()
			block := make([]byte, 4096)
			for i := range 20 {
				if err := fsys.CreateEmpty(fmt.Sprintf("f%d", i), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			for c := range 3 {
				for i := range 300 {
					name := fmt.Sprintf("f%d", i%20)
					if _, err := fsys.WriteAt(name, block, int64(c*300+i)*8192); err != nil {
						t.Fatal(err)
					}
				}
				if err := fsys.Sync(); err != nil {
					t.Fatal(err)
				}
			}
			wc, err := fsys.WriteCounters()
			if err != nil {
				t.Fatal(err)
			}
			if wc.Commits != 3 || wc.DeviceBytesWritten < 900*4096 {
				t.Errorf("commits %d, device bytes %d", wc.Commits, wc.DeviceBytesWritten)
			}
			for _, name := range []string{"fs", "extent", "csum", "root"} {
				if wc.Trees[name].BlocksWritten == 0 {
					t.Errorf("tree %s: no blocks written: %+v", name, wc.Trees)
				}
			}
			tot := wc.Total()
			if tot.PushLeafRight == 0 {
				t.Fatalf("no push_leaf_right: %+v", wc.Trees)
			}
			for name, c := range wc.Trees {
				sum := c.PushLeafRightShortcut + c.PushLeafRightNotAtEnd + c.PushLeafRightAtEndNoSibling +
					c.PushLeafRightAtEndNoRoom + c.PushLeafRightAtEndShortcutOff
				if sum != c.PushLeafRight {
					t.Errorf("%s: reasons add up to %d, push_leaf_right %d", name, sum, c.PushLeafRight)
				}
				if off && c.PushLeafRightShortcut != 0 || !off && c.PushLeafRightAtEndShortcutOff != 0 {
					t.Errorf("%s: %+v", name, c)
				}
			}
			ro, err := btrfs.Open(img, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer ro.Close()
			if _, err := ro.WriteCounters(); !errors.Is(err, fs.ErrPermission) {
				t.Errorf("read-only FS: %v", err)
			}
		})
	}
}
