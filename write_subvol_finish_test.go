//go:build linux

package btrfs_test

import (
	"bufio"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
	"github.com/gobtrfs/btrfs/mkfs"
)

// TestFinishKernelDrop opens for writing an image on which the kernel
// deleted two subvolumes and was unmounted while its cleaner was still
// dropping them (ROOT_ITEM refs 0, an ORPHAN_ITEM, drop_progress set
// where it had got to): gone, a subvolume of its own, and src, whose
// read-only snapshot src-snap outlives it (so the kernel's drop turns
// src's blocks to name their children by address as it goes). Our open
// finishes both drops from where the kernel stopped and commits: btrfs
// check (6.2 and 6.19, with data checksums) is clean, the root tree holds
// neither ROOT_ITEM nor orphan item of them, the kernel shows src-snap
// and keep as before, and the data extents left are exactly those the
// kernel's own cleaner leaves when it finishes a copy of the image.
func TestFinishKernelDrop(t *testing.T) {
	btrfstest.RequireInterop(t)
	img, ids, want := halfDropped(t)
	// The kernel's own finish, on a copy, for the data extents it leaves.
	kimg := kernelCleaned(t, img)

	w, err := btrfs.OpenWritable(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteFile("keep/after", []byte("after"), 0o644); err != nil {
		t.Fatal(err)
	}
	want["keep"]["after"] = "after"
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	btrfstest.Check(t, []string{img}, true)
	btrfstest.CheckNewer(t, img, true)
	wantDropsLike(t, img, kimg, ids)
	dir := btrfstest.Mount(t, "ro", img)
	for _, sv := range slices.Sorted(maps.Keys(want)) {
		if d := snapModelDiff(want[sv], scanSnapModel(t, filepath.Join(dir, sv))); len(d) > 0 {
			t.Errorf("kernel's %s after the drops: %q", sv, d)
		}
	}
	for _, sv := range []string{"gone", "src"} {
		if _, err := os.Lstat(filepath.Join(dir, sv)); err == nil {
			t.Errorf("the kernel shows %s", sv)
		}
	}
	btrfstest.Unmount(t, dir)
}

// halfDropped makes TestFinishKernelDrop's image (halfDroppedImage),
// up to three times: whether the kernel's cleaner stops half way depends
// on when it runs, and on a loaded machine it has finished both drops
// within one read-write moment. Such an image tests nothing.
func halfDropped(t *testing.T) (img string, ids map[string]uint64, want map[string]snapModel) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		img, ids, want, ok := halfDroppedImage(t)
		if ok {
			return img, ids, want
		}
		if attempt == 3 {
			t.Fatalf("the kernel finished both drops before it could be stopped, %d times", attempt)
		}
		t.Logf("attempt %d: the kernel finished both drops; again", attempt)
	}
}

// halfDroppedImage makes TestFinishKernelDrop's image with the kernel:
// ok is false when the kernel's cleaner finished both drops before it
// could be stopped.
func halfDroppedImage(t *testing.T) (img string, ids map[string]uint64, want map[string]snapModel, ok bool) {
	t.Helper()
	img = filepath.Join(t.TempDir(), "fs.img")
	// 4 KiB nodes: many blocks to drop, so that the unmount stops the
	// cleaner half way.
	if err := mkfs.Format(img, mkfs.Options{Size: 1 << 30, NodeSize: 4096}); err != nil {
		t.Fatal(err)
	}
	btrfsCmd := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("btrfs", args...).CombinedOutput(); err != nil {
			t.Fatalf("btrfs %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	content := func(i int) []byte {
		if i%97 == 0 {
			return []byte(strings.Repeat(fmt.Sprintf("extent %d|", i), 1000)) // in a data extent
		}
		return []byte(strings.Repeat(fmt.Sprint(i), 1+i%30)) // inline
	}
	fill := func(dir string, n int) {
		t.Helper()
		for d := range 20 {
			if err := os.Mkdir(filepath.Join(dir, fmt.Sprintf("d%02d", d)), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		for i := range n {
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("d%02d/f%d", i%20, i)), content(i), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	mnt := btrfstest.Mount(t, "", img)
	for _, sv := range []string{"gone", "src", "keep"} {
		btrfsCmd("subvolume", "create", filepath.Join(mnt, sv))
	}
	fill(filepath.Join(mnt, "gone"), 20000)
	fill(filepath.Join(mnt, "src"), 80000)
	fill(filepath.Join(mnt, "keep"), 500)
	btrfsCmd("filesystem", "sync", mnt)
	btrfsCmd("subvolume", "snapshot", "-r", filepath.Join(mnt, "src"), filepath.Join(mnt, "src-snap"))
	// src changes after the snapshot: some of its blocks are its own.
	for i := 0; i < 80000; i += 301 {
		if err := os.WriteFile(filepath.Join(mnt, fmt.Sprintf("src/d%02d/f%d", i%20, i)), []byte("changed"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	btrfsCmd("filesystem", "sync", mnt)
	want = map[string]snapModel{"src-snap": scanSnapModel(t, filepath.Join(mnt, "src-snap")), "keep": scanSnapModel(t, filepath.Join(mnt, "keep"))}
	ids = map[string]uint64{}
	for _, sv := range []string{"gone", "src"} {
		out, err := exec.Command("btrfs", "inspect-internal", "rootid", filepath.Join(mnt, sv)).CombinedOutput()
		if err != nil {
			t.Fatalf("rootid %s: %v\n%s", sv, err, out)
		}
		var id uint64
		if _, err := fmt.Sscan(string(out), &id); err != nil {
			t.Fatal(err)
		}
		ids[sv] = id
	}
	// Deleted, then the filesystem read-only at once, so the cleaner
	// has not begun; then read-write for a moment and read-only again
	// (the cleaner stops at the end of its running transaction, its
	// progress saved) until a drop is half done.
	// src first: the cleaner drops in the order of deletion, and src's
	// drop, whose blocks src-snap shares, is the one to catch half way.
	btrfsCmd("subvolume", "delete", filepath.Join(mnt, "src"), filepath.Join(mnt, "gone"))
	remount := func(mode string) {
		t.Helper()
		if out, err := exec.Command("mount", "-o", "remount,"+mode, mnt).CombinedOutput(); err != nil {
			t.Fatalf("remount %s: %v\n%s", mode, err, out)
		}
	}
	remount("ro")
	half := map[string]bool{}
	for _, d := range []time.Duration{0, 5, 10, 20, 30, 60, 100, 150, 250, 400, 600} {
		remount("rw")
		time.Sleep(d * time.Millisecond)
		remount("ro")
		// The loop device writes through the image file's page
		// cache: a read of the file sees the last commit.
		root := dumpTree(t, img, "root")
		gone := 0
		for _, sv := range []string{"gone", "src"} {
			item := rootItemText(root, ids[sv])
			switch {
			case item == "":
				gone++
				t.Logf("%s (%d): after %d ms read-write dropped whole", sv, ids[sv], d)
			case !strings.Contains(item, "refs 0"):
				t.Fatalf("%s: root item without refs 0:\n%s", sv, item)
			case !strings.Contains(item, "drop_progress key (0 UNKNOWN.0 0)"):
				half[sv] = true
				i := strings.Index(item, "drop_progress")
				t.Logf("%s (%d): after %d ms read-write the kernel stopped at %s", sv, ids[sv], d, strings.TrimSpace(item[i:i+strings.Index(item[i:], "\n")]))
			default:
				t.Logf("%s (%d): after %d ms read-write not begun", sv, ids[sv], d)
			}
		}
		if half["src"] || len(half) > 0 && gone > 0 {
			break
		}
		if gone == 2 {
			btrfstest.Unmount(t, mnt)
			return "", nil, nil, false
		}
	}
	if len(half) == 0 {
		btrfstest.Unmount(t, mnt)
		return "", nil, nil, false
	}
	btrfstest.Unmount(t, mnt)
	btrfstest.Check(t, []string{img}, true)
	return img, ids, want, true
}

// dumpTree returns dump-tree's text of tree name of img.
func dumpTree(t *testing.T, img, name string) string {
	t.Helper()
	out, err := exec.Command("btrfs", "inspect-internal", "dump-tree", "-t", name, img).CombinedOutput()
	if err != nil {
		t.Fatalf("dump-tree -t %s: %v\n%s", name, err, out)
	}
	return string(out)
}

// rootItemText returns the lines of the ROOT_ITEM of tree id in a root
// tree dump, "" if there is none.
func rootItemText(dump string, id uint64) string {
	prefix := fmt.Sprintf("key (%d ROOT_ITEM ", id)
	for i := 0; ; {
		j := strings.Index(dump[i:], prefix)
		if j < 0 {
			return ""
		}
		rest := dump[i+j:]
		line := rest[:strings.Index(rest+"\n", "\n")]
		if strings.Contains(line, " itemoff ") {
			if k := strings.Index(rest, "\titem "); k >= 0 {
				rest = rest[:k]
			}
			return rest
		}
		i += j + len(prefix)
	}
}

// dataExtents lists the data extents of img's extent tree, as
// "address+length", sorted.
func dataExtents(t *testing.T, img string) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(strings.NewReader(dumpTree(t, img, "extent")))
	var last string
	for sc.Scan() {
		line := sc.Text()
		if i := strings.Index(line, " key ("); i >= 0 && strings.Contains(line, " EXTENT_ITEM ") {
			f := strings.Fields(line[i+len(" key ("):])
			last = f[0] + "+" + strings.TrimSuffix(f[2], ")")
			continue
		}
		if last != "" && strings.Contains(line, "flags DATA") {
			out = append(out, last)
		}
		last = ""
	}
	slices.Sort(out)
	return out
}

// minus returns the elements of a not in b (both sorted).
func minus(a, b []string) []string {
	var d []string
	for _, x := range a {
		if _, ok := slices.BinarySearch(b, x); !ok {
			d = append(d, x)
		}
	}
	return d
}
