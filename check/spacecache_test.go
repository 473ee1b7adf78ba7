package check

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gobtrfs/btrfs/internal/btrfstest"
	"github.com/gobtrfs/btrfs/internal/disk"
)

// progsCheck runs btrfs check --readonly on img and returns whether it
// found the image clean, and what it printed.
func progsCheck(t *testing.T, img string) (bool, string) {
	t.Helper()
	btrfstest.RequireProgs(t)
	cmd := exec.Command("btrfs", "check", "--readonly", img)
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	out, err := cmd.CombinedOutput()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatal(err)
	}
	return err == nil, string(out)
}

// makeKernelV1Image formats an image without the free-space tree and lets
// the kernel write v1 space caches under space_cache=v1 (it writes them
// only for block groups of 100 MiB or more, hence the size).
func makeKernelV1Image(t *testing.T) string {
	t.Helper()
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{Size: 1280 << 20, Extra: []string{"-R", "^free-space-tree"}})
	mnt := btrfstest.Mount(t, "space_cache=v1", img)
	for i := 1; i <= 40; i++ {
		b := make([]byte, i*7000)
		for j := range b {
			b[j] = byte(i * j)
		}
		if err := os.WriteFile(filepath.Join(mnt, fmt.Sprintf("f%d", i)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := exec.Command("sync").CombinedOutput(); err != nil {
		t.Fatalf("sync: %v\n%s", err, out)
	}
	for i := 10; i <= 19; i++ {
		if err := os.Remove(filepath.Join(mnt, fmt.Sprintf("f%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	btrfstest.Unmount(t, mnt)
	return img
}

// TestCheckSpaceCacheV1: on a kernel-made space_cache=v1 image our check
// is clean as btrfs check is; a cache entry moved by a block (its page
// checksum made right again) is found by both, in the same words.
func TestCheckSpaceCacheV1(t *testing.T) {
	btrfstest.RequireInterop(t)
	img := makeKernelV1Image(t)
	progsClean, out := progsCheck(t, img)
	if !progsClean {
		t.Fatalf("btrfs check finds the kernel's v1 image not clean:\n%s", out)
	}
	var lines []string
	rep, err := runCheckLog(img, &lines)
	must(t, err)
	if !rep.Clean() {
		t.Fatalf("kernel v1 image not clean:\n%s", problemsText(rep))
	}
	if !containsStr(strings.Join(lines, "\n"), "checking free space cache") {
		t.Fatalf("no free space cache phase:\n%s", strings.Join(lines, "\n"))
	}
	if got, want := fmt.Sprint(rep.Summary.DataBytesAllocated), summaryField(out, "file data blocks allocated: "); got != want {
		t.Errorf("file data blocks allocated %s, btrfs check says %s", got, want)
	}

	// Move the first extent entry of a cache with entries by a sector.
	c := openChecker(t, img)
	leaf, slot := findItem(t, c, disk.RootTreeObjectID, func(k disk.Key, data []byte) bool {
		return k.ObjectID == disk.FreeSpaceObjectID && len(data) >= v1HeaderSize && binary.LittleEndian.Uint64(data[disk.KeySize+8:]) > 0
	})
	var loc disk.Key
	must(t, loc.Decode(leaf.ItemData(slot)))
	eleaf, eslot := findItem(t, c, disk.RootTreeObjectID, func(k disk.Key, _ []byte) bool {
		return k.ObjectID == loc.ObjectID && k.Type == disk.ExtentDataKey && k.Offset == 0
	})
	var fe disk.FileExtentItem
	must(t, fe.Decode(eleaf.ItemData(eslot)))
	ileaf, islot := findItem(t, c, disk.RootTreeObjectID, func(k disk.Key, _ []byte) bool {
		return k.ObjectID == loc.ObjectID && k.Type == disk.InodeItemKey
	})
	var ii disk.InodeItem
	must(t, ii.Decode(ileaf.ItemData(islot)))
	npages := ii.Size / v1PageSize
	mp, err := c.m.Mirrors(fe.DiskBytenr+disk.LogicalAddr(fe.Offset), v1PageSize)
	must(t, err)
	phys := int64(mp.Copies[0].Physical)
	page := make([]byte, v1PageSize)
	rf, err := os.Open(img)
	must(t, err)
	_, err = rf.ReadAt(page, phys)
	rf.Close()
	must(t, err)
	first := 4*npages + 8

	// A byte flipped in the page (its CRC left as it was): the cache is
	// not loaded, which is no error to either check.
	f, err := os.OpenFile(img, os.O_RDWR, 0)
	must(t, err)
	defer f.Close()
	flip := func() {
		t.Helper()
		b := []byte{page[first+3] ^ 1}
		_, err := f.WriteAt(b, phys+int64(first)+3)
		must(t, err)
		page[first+3] = b[0]
		must(t, f.Sync())
	}
	flip()
	progsClean, out = progsCheck(t, img)
	lines = nil
	rep, err = runCheckLog(img, &lines)
	must(t, err)
	if !rep.Clean() || !progsClean || !containsStr(out, "csum mismatch on free space cache") ||
		!containsStr(strings.Join(lines, "\n"), "btrfs: csum mismatch on free space cache") {
		t.Fatalf("cache page with a bad CRC: ours clean=%v, btrfs check clean=%v:\n%s\nours:\n%s\nbtrfs check:\n%s",
			rep.Clean(), progsClean, problemsText(rep), strings.Join(lines, "\n"), out)
	}
	flip()

	if page[first+16] != v1EntryExtent {
		t.Skipf("the first cache entry is a bitmap (type %d)", page[first+16])
	}
	le := binary.LittleEndian
	le.PutUint64(page[first:], le.Uint64(page[first:])+uint64(c.sb.SectorSize))
	le.PutUint32(page, disk.CRC32C(page[4*npages:]))
	_, err = f.WriteAt(page, phys)
	must(t, err)
	must(t, f.Sync())

	progsClean, out = progsCheck(t, img)
	lines = nil
	rep, err = runCheckLog(img, &lines)
	must(t, err)
	if rep.Clean() || progsClean {
		t.Fatalf("moved cache entry: ours clean=%v, btrfs check clean=%v:\n%s\nbtrfs check:\n%s", rep.Clean(), progsClean, problemsText(rep), out)
	}
	found := false
	for _, p := range rep.Problems {
		if p.Kind == KindFreeSpace && containsStr(out, p.Message) {
			found = true
		}
	}
	if !found {
		t.Fatalf("our problems are not btrfs check's:\n%s\nbtrfs check:\n%s", problemsText(rep), out)
	}
	if !containsStr(strings.Join(lines, "\n"), "cache appears valid but isn't") || !containsStr(out, "cache appears valid but isn't") {
		t.Fatalf("no \"cache appears valid but isn't\" line:\nours:\n%s\nbtrfs check:\n%s", strings.Join(lines, "\n"), out)
	}
}

// TestCheckBackupRoots: btrfs check (6.2 and 6.19) does not look at the
// superblock's backup roots: a backup slot naming a block that is not a
// tree root, or carrying a wrong generation, is no error to it, and none
// to ours.
func TestCheckBackupRoots(t *testing.T) {
	btrfstest.RequireInterop(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{})
	mnt := btrfstest.Mount(t, "", img)
	btrfstest.PopulateFiles(t, mnt, 1)
	btrfstest.Unmount(t, mnt)
	for _, tc := range []struct {
		name string
		mod  func(b *disk.BackupRoot)
	}{
		{"bytenr", func(b *disk.BackupRoot) { b.TreeRoot += 123 << 12 }},
		{"generation", func(b *disk.BackupRoot) { b.TreeRootGen += 1000; b.ExtentRootGen = 0 }},
		{"level", func(b *disk.BackupRoot) { b.FSRootLevel = 9 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cp := filepath.Join(t.TempDir(), "b.img")
			data, err := os.ReadFile(img)
			must(t, err)
			must(t, os.WriteFile(cp, data, 0o644))
			rewriteSuper(t, cp, func(sb *disk.Superblock) {
				for i := range sb.BackupRoots {
					tc.mod(&sb.BackupRoots[i])
				}
			})
			progsClean, out := progsCheck(t, cp)
			rep := withoutStaleFreeSpaceInfo(runCheck(t, cp, false))
			if rep.Clean() != progsClean {
				t.Fatalf("ours clean=%v, btrfs check clean=%v:\n%s\nbtrfs check:\n%s", rep.Clean(), progsClean, problemsText(rep), out)
			}
		})
	}
}

// rewriteSuper applies mod to the primary superblock of img and writes it
// back with its checksum made right.
func rewriteSuper(t *testing.T, img string, mod func(sb *disk.Superblock)) {
	t.Helper()
	f, err := os.OpenFile(img, os.O_RDWR, 0)
	must(t, err)
	defer f.Close()
	b := make([]byte, disk.SuperblockSize)
	_, err = f.ReadAt(b, int64(disk.SuperblockOffset))
	must(t, err)
	var sb disk.Superblock
	must(t, sb.Decode(b))
	mod(&sb)
	sb.Encode(b)
	sb.CsumType.SumBlock(b)
	_, err = f.WriteAt(b, int64(disk.SuperblockOffset))
	must(t, err)
}

// runCheckLog runs the checker on img, appending the lines it prints to
// *lines.
func runCheckLog(img string, lines *[]string) (Report, error) {
	return Run(context.Background(), []string{img}, Options{Log: func(l string) { *lines = append(*lines, l) }})
}

// summaryField returns the value btrfs check printed after prefix.
func summaryField(out, prefix string) string {
	for _, l := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), prefix); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
