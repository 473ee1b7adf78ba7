//go:build linux

package btrfs_test

import (
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
	"github.com/gobtrfs/btrfs/mkfs"
)

// TestFinishKernelDropsSharing: the kernel deleted a subvolume and its
// writable snapshot (two trees sharing most of their blocks) and was made
// read-only before its cleaner finished either drop. Our open finishes both
// in one change: each drop must be planned after the one before it has
// taken its references away (a plan made for both up front counts every
// shared block as still shared with the other, so neither frees it nor
// what is below). btrfs check 6.2 and 6.19 are clean, no root or orphan
// item is left, the data extents left are those the kernel's own cleaner
// leaves on a copy, and the kernel shows keep as before.
func TestFinishKernelDropsSharing(t *testing.T) {
	btrfstest.RequireInterop(t)
	var img string
	var ids map[string]uint64
	for attempt := 1; ; attempt++ {
		var ok bool
		if img, ids, ok = sharingDeadImage(t); ok {
			break
		}
		if attempt == 3 {
			t.Fatalf("the kernel's cleaner finished a drop before it could be stopped, %d times", attempt)
		}
		t.Logf("attempt %d: the kernel's cleaner finished a drop; again", attempt)
	}
	kimg := kernelCleaned(t, img)

	w, err := btrfs.OpenWritable(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	btrfstest.Check(t, []string{img}, true)
	btrfstest.CheckNewer(t, img, true)
	wantDropsLike(t, img, kimg, ids)
	dir := btrfstest.Mount(t, "ro", img)
	if b, err := os.ReadFile(filepath.Join(dir, "keep/f")); err != nil || string(b) != "keep" {
		t.Errorf("keep/f: %q, %v", b, err)
	}
	btrfstest.Unmount(t, dir)
}

// sharingDeadImage makes TestFinishKernelDropsSharing's image: ok is
// false when the kernel's cleaner finished a drop before the remount.
func sharingDeadImage(t *testing.T) (img string, ids map[string]uint64, ok bool) {
	t.Helper()
	img = filepath.Join(t.TempDir(), "fs.img")
	// 4 KiB nodes: trees of three levels from a few thousand files.
	if err := mkfs.Format(img, mkfs.Options{Size: 1 << 30, NodeSize: 4096}); err != nil {
		t.Fatal(err)
	}
	btrfsCmd := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("btrfs", args...).CombinedOutput()
		if err != nil {
			t.Fatalf("btrfs %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	mnt := btrfstest.Mount(t, "", img)
	btrfsCmd("subvolume", "create", filepath.Join(mnt, "src"))
	if err := os.Mkdir(filepath.Join(mnt, "keep"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(mnt, "keep/f"), []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	for d := range 10 {
		if err := os.Mkdir(filepath.Join(mnt, fmt.Sprintf("src/d%d", d)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 30000 {
		data := []byte(strings.Repeat(fmt.Sprint(i), 1+i%20)) // inline
		if i%200 == 0 {
			data = []byte(strings.Repeat(fmt.Sprintf("extent %d|", i), 800)) // a data extent
		}
		if err := os.WriteFile(filepath.Join(mnt, fmt.Sprintf("src/d%d/f%d", i%10, i)), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	btrfsCmd("filesystem", "sync", mnt)
	btrfsCmd("subvolume", "snapshot", filepath.Join(mnt, "src"), filepath.Join(mnt, "snap"))
	// Both change after the snapshot: each owns some blocks, shares the rest.
	for i := 0; i < 30000; i += 97 {
		for _, sv := range []string{"src", "snap"} {
			if err := os.WriteFile(filepath.Join(mnt, fmt.Sprintf("%s/d%d/f%d", sv, i%10, i)), []byte(sv), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	btrfsCmd("filesystem", "sync", mnt)
	ids = map[string]uint64{}
	for _, sv := range []string{"src", "snap"} {
		var id uint64
		if _, err := fmt.Sscan(btrfsCmd("inspect-internal", "rootid", filepath.Join(mnt, sv)), &id); err != nil {
			t.Fatal(err)
		}
		ids[sv] = id
	}
	btrfsCmd("subvolume", "delete", filepath.Join(mnt, "src"), filepath.Join(mnt, "snap"))
	// Read-only at once: the cleaner has not finished either drop (ok
	// says whether it had).
	if out, err := exec.Command("mount", "-o", "remount,ro", mnt).CombinedOutput(); err != nil {
		t.Fatalf("remount ro: %v\n%s", err, out)
	}
	btrfstest.Unmount(t, mnt)
	root := dumpTree(t, img, "root")
	for _, sv := range []string{"src", "snap"} {
		item := rootItemText(root, ids[sv])
		if item == "" || !strings.Contains(item, "refs 0") {
			t.Logf("%s: %q", sv, item)
			return "", nil, false
		}
		if !strings.Contains(item, "drop_progress key (0 UNKNOWN.0 0)") {
			t.Logf("%s: the kernel's drop begun (both trees still dead: the case holds)", sv)
		}
	}
	btrfstest.Check(t, []string{img}, true)
	return img, ids, true
}

// TestDeferredDeleteInterop: DeleteSubvolumeWith(DeferDrop) leaves the
// tree as the kernel's deletion does (ROOT_ITEM refs 0, an ORPHAN_ITEM,
// the tree untouched): btrfs check 6.2 and 6.19 accept the image, the
// kernel's cleaner drops it at a read-write mount, and our next writable
// open drops it too, leaving the same data extents as the kernel's
// cleaner. One deferred tree shares blocks with a read-only snapshot of
// it that outlives it, another is a subvolume of its own.
func TestDeferredDeleteInterop(t *testing.T) {
	btrfstest.RequireInterop(t)
	img := filepath.Join(t.TempDir(), "fs.img")
	if err := mkfs.Format(img, mkfs.Options{Size: 512 << 20, NodeSize: 4096}); err != nil {
		t.Fatal(err)
	}
	w, err := btrfs.OpenWritable(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]uint64{}
	for _, sv := range []string{"sv", "alone"} {
		id, err := w.CreateSubvolume(sv, nil)
		if err != nil {
			t.Fatal(err)
		}
		ids[sv] = id
		for i := range 1500 {
			data := []byte(strings.Repeat(fmt.Sprint(i), 1+i%20))
			if i%100 == 0 {
				data = []byte(strings.Repeat(fmt.Sprintf("extent %d|", i), 800))
			}
			if err := w.WriteFile(fmt.Sprintf("%s/f%d", sv, i), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := w.Snapshot("sv", "snap", &btrfs.SnapshotOptions{ReadOnly: true}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 1500; i += 50 { // sv's own blocks beside the shared ones
		if err := w.WriteFile(fmt.Sprintf("sv/f%d", i), []byte("changed"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, sv := range []string{"sv", "alone"} {
		if err := w.DeleteSubvolumeWith(sv, &btrfs.DeleteSubvolumeOptions{DeferDrop: true}); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Stat(sv); err == nil {
			t.Errorf("%s still shows after its deletion", sv)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	root := dumpTree(t, img, "root")
	for _, sv := range []string{"sv", "alone"} {
		item := rootItemText(root, ids[sv])
		if !strings.Contains(item, "refs 0") || !strings.Contains(root, fmt.Sprintf("ORPHAN_ITEM %d)", ids[sv])) {
			t.Fatalf("%s: not left for the cleaner:\n%s", sv, item)
		}
	}
	btrfstest.Check(t, []string{img}, true)
	btrfstest.CheckNewer(t, img, true)
	r, err := btrfs.Open(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	subs, err := r.Subvolumes()
	r.Close()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range subs {
		if s.ID == ids["sv"] || s.ID == ids["alone"] {
			t.Errorf("the reader lists deleted subvolume %d", s.ID)
		}
	}

	// The kernel's cleaner on a copy.
	kimg := kernelCleaned(t, img)
	kmnt := btrfstest.Mount(t, "ro", kimg)
	if b, err := os.ReadFile(filepath.Join(kmnt, "snap/f50")); err != nil || string(b) != strings.Repeat("50", 11) {
		t.Errorf("kernel: snap/f50 = %q, %v", b, err)
	}
	btrfstest.Unmount(t, kmnt)
	kroot := dumpTree(t, kimg, "root")
	for _, sv := range []string{"sv", "alone"} {
		if item := rootItemText(kroot, ids[sv]); item != "" {
			t.Errorf("the kernel's cleaner left %s:\n%s", sv, item)
		}
	}

	// Ours.
	w, err = btrfs.OpenWritable(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	btrfstest.Check(t, []string{img}, true)
	wantDropsLike(t, img, kimg, ids)
	dir := btrfstest.Mount(t, "ro", img)
	if b, err := os.ReadFile(filepath.Join(dir, "snap/f50")); err != nil || string(b) != strings.Repeat("50", 11) {
		t.Errorf("after our drop: snap/f50 = %q, %v", b, err)
	}
	btrfstest.Unmount(t, dir)
}

// kernelCleaned copies img and lets the kernel's cleaner finish every
// pending drop on the copy (a read-write mount, a sync to wake the
// cleaner, subvolume sync to wait for it); it returns the copy, checked.
func kernelCleaned(t *testing.T, img string) string {
	t.Helper()
	kimg := filepath.Join(t.TempDir(), "kernel.img")
	if out, err := exec.Command("cp", "--sparse=always", img, kimg).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v\n%s", err, out)
	}
	kmnt := btrfstest.Mount(t, "", kimg)
	for _, args := range [][]string{{"filesystem", "sync", kmnt}, {"subvolume", "sync", kmnt}} {
		if out, err := exec.Command("btrfs", args...).CombinedOutput(); err != nil {
			t.Fatalf("btrfs %v: %v\n%s", args, err, out)
		}
	}
	btrfstest.Unmount(t, kmnt)
	btrfstest.Check(t, []string{kimg}, true)
	return kimg
}

// wantDropsLike checks that img holds neither ROOT_ITEM nor orphan item
// of the subvolumes ids names, and the same data extents as kimg, the
// same filesystem after the kernel's cleaner.
func wantDropsLike(t *testing.T, img, kimg string, ids map[string]uint64) {
	t.Helper()
	root := dumpTree(t, img, "root")
	for _, sv := range slices.Sorted(maps.Keys(ids)) {
		if item := rootItemText(root, ids[sv]); item != "" {
			t.Errorf("%s: root item left:\n%s", sv, item)
		}
		if strings.Contains(root, fmt.Sprintf("ORPHAN_ITEM %d)", ids[sv])) {
			t.Errorf("%s: orphan item left", sv)
		}
	}
	ours, kernel := dataExtents(t, img), dataExtents(t, kimg)
	if !slices.Equal(ours, kernel) {
		t.Errorf("data extents left: ours %d, the kernel's %d; only ours %v, only the kernel's %v",
			len(ours), len(kernel), minus(ours, kernel), minus(kernel, ours))
	}
}
