package check

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/gobtrfs/btrfs/internal/btrfstest"
	"github.com/gobtrfs/btrfs/internal/disk"
)

// staleFreeSpaceInfo is the one problem btrfs check 6.19 finds in images
// made by mkfs.btrfs 6.2: free-space info items left behind for the
// temporary block groups mkfs removed. Our fixtures were made that way.
const staleFreeSpaceInfo = "has no corresponding block group"

// TestCheckFixturesClean: the committed fixture images (kernel- and
// mkfs.btrfs-made) are clean by our check, data checksums included,
// except for what btrfs check 6.19 reports too.
func TestCheckFixturesClean(t *testing.T) {
	for _, name := range btrfstest.FixtureNames(t) {
		t.Run(name, func(t *testing.T) {
			img := btrfstest.OpenFixture(t, name)
			rep := runCheck(t, img, true)
			for _, p := range rep.Problems {
				if p.Kind == KindFreeSpace && containsStr(p.Message, staleFreeSpaceInfo) {
					continue
				}
				t.Errorf("false alarm: %s: %s", p.Kind, p.Message)
			}
			if rep.Summary.TreeBytes == 0 || rep.Summary.BytesUsed == 0 {
				t.Errorf("empty summary: %+v", rep.Summary)
			}
		})
	}
}

// withoutStaleFreeSpaceInfo drops the problem mkfs.btrfs 6.2 leaves in
// every image it makes (see staleFreeSpaceInfo), which the installed
// btrfs check (6.2) does not report.
func withoutStaleFreeSpaceInfo(rep Report) Report {
	var keep []Problem
	for _, p := range rep.Problems {
		if !(p.Kind == KindFreeSpace && containsStr(p.Message, staleFreeSpaceInfo)) {
			keep = append(keep, p)
		}
	}
	rep.Problems = keep
	return rep
}

func containsStr(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

// TestCheckOwnWriterClean: an image made by our mkfs and filled by our
// writer is clean, and btrfs check agrees when it is installed.
func TestCheckOwnWriterClean(t *testing.T) {
	img := makeImage(t)
	rep := runCheck(t, img, true)
	if !rep.Clean() {
		t.Fatalf("false alarm on our own image:\n%s", problemsText(rep))
	}
	if btrfstest.Interop() {
		btrfstest.Check(t, []string{img}, true)
	}
}

// TestCheckMkfsProgsClean: a fresh mkfs.btrfs image is clean.
func TestCheckMkfsProgsClean(t *testing.T) {
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{})
	rep := runCheck(t, img, true)
	for _, p := range rep.Problems {
		// mkfs.btrfs before 6.19 leaves these; btrfs check 6.19 reports them.
		if p.Kind == KindFreeSpace && containsStr(p.Message, staleFreeSpaceInfo) {
			continue
		}
		t.Errorf("false alarm on a mkfs.btrfs image: %s: %s", p.Kind, p.Message)
	}
	btrfstest.Check(t, []string{img}, true)
}

// TestCheckSummary: the summary's totals are self-consistent.
func TestCheckSummary(t *testing.T) {
	img := makeImage(t)
	s := runCheck(t, img, false).Summary
	if s.FSTreeBytes+s.ExtentTreeBytes > s.TreeBytes || s.TreeBytes > s.BytesUsed || s.CsumBytes == 0 ||
		s.DataBytesReferenced < 300<<10 || s.DataBytesAllocated == 0 {
		t.Fatalf("summary %+v", s)
	}
}

// TestCheckCannotRun: no device, a missing file and a file that is not
// btrfs are errors (exit status 2), not reports.
func TestCheckCannotRun(t *testing.T) {
	if _, err := Run(context.Background(), nil, Options{}); !errors.Is(err, ErrNoDevice) {
		t.Errorf("no device: %v", err)
	}
	if _, err := Run(context.Background(), []string{t.TempDir() + "/missing"}, Options{}); err == nil {
		t.Error("missing file: no error")
	}
	junk := t.TempDir() + "/junk"
	if err := os.WriteFile(junk, make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Run(context.Background(), []string{junk}, Options{}); !errors.Is(err, disk.ErrCorrupt) {
		t.Errorf("not btrfs: %v, want ErrCorrupt", err)
	}
	// A superblock whose root tree cannot be read.
	img := makeImage(t)
	c := openChecker(t, img)
	leaf, _ := findItem(t, c, disk.RootTreeObjectID, func(disk.Key, []byte) bool { return true })
	if leaf.Bytenr() != c.sb.Root {
		t.Skip("root tree has more than one level")
	}
	leaf[disk.HeaderSize] ^= 1
	writeBlock(t, c, img, leaf, false)
	if _, err := Run(context.Background(), []string{img}, Options{}); !errors.Is(err, disk.ErrCorrupt) {
		t.Errorf("unreadable root tree: %v, want ErrCorrupt", err)
	}
}

// TestCheckCorruptions damages a good image one way per phase, through
// the on-disk encoders with the block checksums recomputed, and asserts
// each damage is found as its kind of problem.
func TestCheckCorruptions(t *testing.T) {
	base := makeImage(t)
	baseBytes, err := os.ReadFile(base)
	if err != nil {
		t.Fatal(err)
	}
	fresh := func(t *testing.T) string {
		img := t.TempDir() + "/fs.img"
		if err := os.WriteFile(img, baseBytes, 0o644); err != nil {
			t.Fatal(err)
		}
		return img
	}
	isFile := func(name string) func(k disk.Key, data []byte) bool {
		return func(k disk.Key, data []byte) bool {
			if k.Type != disk.InodeRefKey {
				return false
			}
			refs, err := disk.ParseInodeRefs(data)
			return err == nil && len(refs) > 0 && string(refs[0].Name) == name
		}
	}
	inodeOf := func(t *testing.T, c *checker, name string) disk.ObjectID {
		leaf, slot := findItem(t, c, disk.FSTreeObjectID, isFile(name))
		return leaf.Key(slot).ObjectID
	}
	cases := []struct {
		name     string
		dataCsum bool
		damage   func(t *testing.T, c *checker, img string)
		kind     Kind
		substr   string
	}{
		{"bad nlink", false, func(t *testing.T, c *checker, img string) {
			ino := inodeOf(t, c, "small")
			leaf, slot := findItem(t, c, disk.FSTreeObjectID, func(k disk.Key, _ []byte) bool {
				return k.ObjectID == ino && k.Type == disk.InodeItemKey
			})
			var it disk.InodeItem
			must(t, it.Decode(leaf.ItemData(slot)))
			it.NLink++
			it.Encode(leaf.ItemData(slot))
			writeBlock(t, c, img, leaf, true)
		}, KindInode, "link count wrong"},
		{"bad nbytes", false, func(t *testing.T, c *checker, img string) {
			ino := inodeOf(t, c, "big")
			leaf, slot := findItem(t, c, disk.FSTreeObjectID, func(k disk.Key, _ []byte) bool {
				return k.ObjectID == ino && k.Type == disk.InodeItemKey
			})
			var it disk.InodeItem
			must(t, it.Decode(leaf.ItemData(slot)))
			it.NBytes += 4096
			it.Encode(leaf.ItemData(slot))
			writeBlock(t, c, img, leaf, true)
		}, KindInode, "nbytes wrong"},
		{"missing dir item", false, func(t *testing.T, c *checker, img string) {
			leaf, slot := findItem(t, c, disk.FSTreeObjectID, func(k disk.Key, data []byte) bool {
				if k.Type != disk.DirItemKey {
					return false
				}
				d, err := disk.ParseDirItems(data)
				return err == nil && string(d[0].Name) == "small"
			})
			if slot == 0 {
				t.Skip("dir item is first in its leaf; deleting it would change the parent's key")
			}
			deleteItem(leaf, slot)
			writeBlock(t, c, img, leaf, true)
		}, KindDirItem, "no dir item"},
		{"wrong ref count", false, func(t *testing.T, c *checker, img string) {
			leaf, slot := findItem(t, c, disk.ExtentTreeObjectID, func(k disk.Key, data []byte) bool {
				return k.Type == disk.ExtentItemKey
			})
			var e disk.ExtentItem
			must(t, e.DecodeAs(disk.ExtentItemKey, leaf.ItemData(slot)))
			e.Refs++
			e.Encode(leaf.ItemData(slot))
			writeBlock(t, c, img, leaf, true)
		}, KindExtentRef, "ref mismatch"},
		{"missing backref", false, func(t *testing.T, c *checker, img string) {
			// A data extent referenced twice (big and its hard link
			// share the inode, so use the extent's single ref): drop
			// its inline ref and keep refs as it was.
			leaf, slot := findItem(t, c, disk.ExtentTreeObjectID, func(k disk.Key, data []byte) bool {
				var e disk.ExtentItem
				return k.Type == disk.ExtentItemKey && e.DecodeAs(k.Type, data) == nil && len(e.InlineRefs) == 1 &&
					e.InlineRefs[0].Type == disk.ExtentDataRefKey
			})
			var e disk.ExtentItem
			must(t, e.DecodeAs(disk.ExtentItemKey, leaf.ItemData(slot)))
			e.InlineRefs[0].Data.Offset += 4096
			e.Encode(leaf.ItemData(slot))
			writeBlock(t, c, img, leaf, true)
		}, KindExtentRef, "data backref"},
		{"free space entry off by a block", false, func(t *testing.T, c *checker, img string) {
			if _, ok := c.tree(disk.FreeSpaceTreeObjectID); !ok {
				t.Skip("no free-space tree")
			}
			leaf, slot := findItem(t, c, disk.FreeSpaceTreeObjectID, func(k disk.Key, data []byte) bool {
				return k.Type == disk.FreeSpaceExtentKey && k.Offset > 2*uint64(c.sb.SectorSize)
			})
			h := leaf.ItemHeader(slot)
			if slot == 0 {
				t.Skip("entry is first in its leaf")
			}
			h.Key.Offset -= uint64(c.sb.SectorSize)
			disk.PutItemHeader(leaf, slot, h)
			writeBlock(t, c, img, leaf, true)
		}, KindFreeSpace, "wrong amount of free space"},
		{"dev extent overlap", false, func(t *testing.T, c *checker, img string) {
			leaf, slot := findItem(t, c, disk.DevTreeObjectID, func(k disk.Key, data []byte) bool {
				return k.Type == disk.DevExtentKey
			})
			var de disk.DevExtent
			must(t, de.Decode(leaf.ItemData(slot)))
			de.Length += 1 << 30
			de.Encode(leaf.ItemData(slot))
			writeBlock(t, c, img, leaf, true)
		}, KindChunk, "didn't find the relative chunk"},
		{"csum for a hole", false, func(t *testing.T, c *checker, img string) {
			leaf, slot := findItem(t, c, disk.CsumTreeObjectID, func(k disk.Key, data []byte) bool {
				return k.Type == disk.ExtentCsumKey
			})
			h := leaf.ItemHeader(slot)
			if slot != leaf.NumItems()-1 {
				// Move the last csum item instead, so keys stay sorted.
				slot = leaf.NumItems() - 1
				h = leaf.ItemHeader(slot)
			}
			if slot == 0 {
				t.Skip("one csum item only, first in its leaf")
			}
			h.Key.Offset += 1 << 40
			disk.PutItemHeader(leaf, slot, h)
			writeBlock(t, c, img, leaf, true)
		}, KindCsum, "there are no extents for csum range"},
		{"flipped data byte", true, func(t *testing.T, c *checker, img string) {
			ino := inodeOf(t, c, "big")
			leaf, slot := findItem(t, c, disk.FSTreeObjectID, func(k disk.Key, _ []byte) bool {
				return k.ObjectID == ino && k.Type == disk.ExtentDataKey
			})
			var fe disk.FileExtentItem
			must(t, fe.Decode(leaf.ItemData(slot)))
			mp, err := c.m.Mirrors(fe.DiskBytenr+disk.LogicalAddr(fe.Offset)+100, 1)
			must(t, err)
			flipByte(t, img, int64(mp.Copies[0].Physical))
		}, KindDataCsum, "csum"},
		{"missing root backref", false, func(t *testing.T, c *checker, img string) {
			leaf, slot := findItem(t, c, disk.RootTreeObjectID, func(k disk.Key, _ []byte) bool {
				return k.Type == disk.RootBackrefKey
			})
			if slot == 0 {
				t.Skip("root backref is first in its leaf")
			}
			deleteItem(leaf, slot)
			writeBlock(t, c, img, leaf, true)
		}, KindRootRef, "no root backref"},
		{"tree block checksum", false, func(t *testing.T, c *checker, img string) {
			leaf, _ := findItem(t, c, disk.FSTreeObjectID, func(k disk.Key, _ []byte) bool { return true })
			leaf[disk.HeaderSize+3] ^= 0xff
			writeBlock(t, c, img, leaf, false)
		}, KindTreeBlock, "checksum"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			img := fresh(t)
			c := openChecker(t, img)
			tc.damage(t, c, img)
			rep, err := Run(context.Background(), []string{img}, Options{DataCsum: tc.dataCsum})
			if err != nil {
				if errors.Is(err, disk.ErrCorrupt) && tc.kind == KindTreeBlock {
					return
				}
				t.Fatalf("check: %v", err)
			}
			if !hasProblem(rep, tc.kind, tc.substr) {
				t.Fatalf("damage not found as %s %q; problems:\n%s", tc.kind, tc.substr, problemsText(rep))
			}
			if btrfstest.Interop() {
				if st := btrfstest.CheckStatus(t, img); st == 0 && tc.kind != KindDataCsum {
					t.Logf("btrfs check calls it clean")
				}
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func flipByte(t *testing.T, img string, off int64) {
	t.Helper()
	f, err := os.OpenFile(img, os.O_RDWR, 0)
	must(t, err)
	defer f.Close()
	b := make([]byte, 1)
	_, err = f.ReadAt(b, off)
	must(t, err)
	b[0] ^= 0x5a
	_, err = f.WriteAt(b, off)
	must(t, err)
}
