package check

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/disk"
	"github.com/gobtrfs/btrfs/mkfs"
)

// TestFSTreeSegments: an fs tree cut into segments streamed in parallel
// gives the report a walk in one piece gives: clean when it is clean
// (names whose records fall in different segments are joined), and the
// same problems after an inode ref is deleted and a dir index moved.
func TestFSTreeSegments(t *testing.T) {
	img := filepath.Join(t.TempDir(), "fs.img")
	must(t, mkfs.Format(img, mkfs.Options{Size: 128 << 20}))
	fsys, err := btrfs.OpenWritable(img, nil)
	must(t, err)
	for d := 0; d < 6; d++ {
		dir := fmt.Sprintf("d%d", d)
		must(t, fsys.Mkdir(dir, 0o755))
		for i := 0; i < 400; i++ {
			must(t, fsys.WriteFile(fmt.Sprintf("%s/f%d", dir, i), []byte(dir), 0o644))
		}
	}
	must(t, fsys.Close())

	c := openChecker(t, img)
	tr, _ := c.tree(disk.FSTreeObjectID)
	if b := c.segmentBounds(tr, 4); len(b) < 3 {
		t.Fatalf("fs tree of level %d cut into %d segments, want several", tr.root.Level, len(b))
	}
	run := func(workers int) Report {
		rep, err := Run(context.Background(), []string{img}, Options{Workers: workers})
		must(t, err)
		return rep
	}
	if rep := run(4); !rep.Clean() {
		t.Fatalf("segmented check not clean:\n%s", problemsText(rep))
	}

	// Damage in a middle segment: an inode ref gone, a dir index moved.
	leaf, slot := findItem(t, c, disk.FSTreeObjectID, func(k disk.Key, _ []byte) bool {
		return k.Type == disk.InodeRefKey && k.ObjectID > 256+1200
	})
	deleteItem(leaf, slot)
	writeBlock(t, c, img, leaf, true)
	c = openChecker(t, img)
	leaf, slot = findItem(t, c, disk.FSTreeObjectID, func(k disk.Key, _ []byte) bool {
		return k.Type == disk.DirIndexKey && k.ObjectID > 256+1600
	})
	data := leaf.ItemData(slot)
	var loc disk.Key
	must(t, loc.Decode(data))
	loc.ObjectID += 3
	loc.Encode(data)
	writeBlock(t, c, img, leaf, true)

	one, four := run(1), run(4)
	t.Logf("found:\n%s", problemsText(one))
	if one.Clean() || problemsText(one) != problemsText(four) {
		t.Fatalf("one piece:\n%s\nsegments:\n%s", problemsText(one), problemsText(four))
	}
}

// TestInoModes: inode types are found across chunks and joined segments,
// and inodes met out of order (or twice) are found as a map would have
// them, the last type set winning.
func TestInoModes(t *testing.T) {
	var a, b inoModes
	for i := 0; i < 3*inoModeChunk; i++ {
		a.set(disk.ObjectID(256+2*i), disk.FtRegular)
	}
	for i := 0; i < 10; i++ {
		b.set(disk.ObjectID(1<<20+i), disk.FtDir)
	}
	a.add(b)
	a.sort()
	for _, tc := range []struct {
		ino disk.ObjectID
		ft  disk.FileType
		ok  bool
	}{{256, disk.FtRegular, true}, {257, 0, false}, {256 + 2*inoModeChunk, disk.FtRegular, true}, {1<<20 + 9, disk.FtDir, true}, {1<<20 + 10, 0, false}, {5, 0, false}} {
		if ft, ok := a.get(tc.ino); ft != tc.ft || ok != tc.ok {
			t.Fatalf("get(%d) = %v %v, want %v %v", tc.ino, ft, ok, tc.ft, tc.ok)
		}
	}
	var c inoModes
	c.set(300, disk.FtRegular)
	c.set(260, disk.FtDir)
	c.set(300, disk.FtSymlink)
	c.sort()
	if ft, ok := c.get(300); !ok || ft != disk.FtSymlink {
		t.Fatalf("get(300) = %v %v after a repeat", ft, ok)
	}
	if ft, ok := c.get(260); !ok || ft != disk.FtDir {
		t.Fatalf("get(260) = %v %v out of order", ft, ok)
	}
}
