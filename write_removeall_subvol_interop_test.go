//go:build linux

package btrfs_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
	"github.com/gobtrfs/btrfs/mkfs"
)

// rmTreeFiles are the files of the tree both builders make for
// TestRemoveAllSubvolumesInterop, by path (subvolumes and directories
// are made on the way; see rmTreeBuild*).
func rmTreeFiles() map[string][]byte {
	files := map[string][]byte{
		"keep":                  []byte("outside t"),
		"src/a":                 []byte("in src"),
		"src/big":               bytes.Repeat([]byte("src data "), 8000),
		"t/f1":                  bytes.Repeat([]byte("t/f1 "), 13000),
		"t/d/f2":                []byte("small"),
		"t/sv1/data":            bytes.Repeat([]byte("sv1 data "), 5000),
		"t/sv1/sub/sv2/c":       []byte("in sv2"),
		"t/sv1/sub/sv2/x/sv3/e": []byte("in sv3, two deep"),
		"t2/f":                  []byte("t2"),
		"t3/f":                  []byte("t3"),
		"t3/def/g":              []byte("in the default subvolume"),
	}
	for i := range 300 {
		// Enough names for several leaves of 4 KiB nodes: snapshots of
		// sv1 share blocks below their roots.
		files[fmt.Sprintf("t/sv1/many/m%03d", i)] = []byte(strings.Repeat(fmt.Sprint(i), 20+i%50))
	}
	return files
}

// rmTreeSubvols are the subvolumes of the tree, parents first.
var rmTreeSubvols = []string{"src", "esrc", "t/sv1", "t/sv1/sub/sv2", "t/sv1/sub/sv2/x/sv3", "t3/def"}

// rmTreeSnapshots are its snapshots (source, destination, read-only),
// made after the files.
var rmTreeSnapshots = []struct {
	src, dst string
	ro       bool
}{
	{"t/sv1", "t/snap1", false},         // sv1 and its snapshot both go: shared blocks
	{"t/sv1/sub/sv2", "snapout", false}, // outside t, with a placeholder of sv3
	{"src", "t/srcsnap", false},         // its source lives on
	{"esrc", "t/emptyro", true},         // read-only and empty: rm -r deletes it
	{"src", "t2/rosnap", true},          // read-only with entries: EROFS
}

// rmTreeAfter are the writes after the snapshots, so that sv1 and snap1
// copy shared blocks.
var rmTreeAfter = map[string][]byte{
	"t/snap1/many/m000": []byte("changed in the snapshot"),
	"t/sv1/many/m001":   []byte("changed in the source"),
}

func rmTreeDirs(files map[string][]byte) []string {
	var dirs []string
	seen := map[string]bool{}
	for p := range files {
		for d := filepath.Dir(p); d != "."; d = filepath.Dir(d) {
			if !seen[d] {
				seen[d] = true
				dirs = append(dirs, d)
			}
		}
	}
	return dirs
}

func isSubvolPath(p string) bool {
	for _, s := range rmTreeSubvols {
		if s == p {
			return true
		}
	}
	return false
}

// TestRemoveAllSubvolumesInterop: the same tree (files, hard link,
// symlink, subvolumes nested two deep, a writable snapshot of one of
// them beside it, one of another outside t, a writable snapshot of a subvolume outside, an empty
// read-only snapshot; a read-only snapshot with entries in t2, the
// default subvolume in t3) is built by the kernel and by our writer;
// each image is copied, and rm -r on a kernel mount (of the copy) and
// our RemoveAll (of the image) each remove t2, t3, snapout/x (a
// directory of a snapshot of sv2 outside t, holding the snapshot's
// placeholder of sv3) and t. RemoveAll answers as rm -r
// does (t2: EROFS, t3: EPERM, and then removes nothing, where rm -r
// removes what it can), removes t whole as rm -r does: the kernel shows
// the same files and subvolumes left on all four, btrfs check
// --check-data-csum is clean on each.
func TestRemoveAllSubvolumesInterop(t *testing.T) {
	btrfstest.RequireInterop(t)
	// Both formatted by our mkfs: btrfs check 6.19 finds stale
	// free-space entries on every image of mkfs.btrfs 6.2
	// (docs/design/0021).
	kimg, uimg := filepath.Join(t.TempDir(), "kernel.img"), filepath.Join(t.TempDir(), "ours.img")
	for _, img := range []string{kimg, uimg} {
		if err := mkfs.Format(img, mkfs.Options{Size: 512 << 20, NodeSize: 4096}); err != nil {
			t.Fatal(err)
		}
	}
	rmTreeBuildKernel(t, kimg)
	rmTreeBuildOurs(t, uimg)

	var results []*btrfstest.Tree
	for _, img := range []string{kimg, uimg} {
		before := rmTreeScan(t, img)
		kcopy := copyImage(t, img)
		start := time.Now()
		results = append(results, rmTreeKernelRm(t, kcopy), rmTreeOurRm(t, img, before))
		t.Logf("removals: %v", time.Since(start))
		start = time.Now()
		for _, img := range []string{kcopy, img} {
			btrfstest.Check(t, []string{img}, true)
			btrfstest.CheckNewer(t, img, true)
		}
		t.Logf("checks: %v", time.Since(start))
	}
	// t2 and t3 differ: rm -r removed what it could there.
	outside := func(p string) bool {
		return p != "t2" && !strings.HasPrefix(p, "t2/") && p != "t3" && !strings.HasPrefix(p, "t3/")
	}
	// Each build's two removals leave the same; the two builds, the same
	// names (their times differ).
	names := []string{"built by the kernel, rm -r", "built by the kernel, RemoveAll", "built by us, rm -r", "built by us, RemoveAll"}
	for i := 0; i < len(results); i += 2 {
		for _, d := range btrfstest.Diff(results[i], results[i+1], btrfstest.DiffOptions{IgnoreDirMtime: true, CompareNlink: true, Filter: outside}) {
			t.Errorf("%s vs %s: %s", names[i], names[i+1], d)
		}
	}
	var kpaths, upaths []string
	for _, p := range results[0].Paths() {
		if outside(p) {
			kpaths = append(kpaths, p)
		}
	}
	for _, p := range results[2].Paths() {
		if outside(p) {
			upaths = append(upaths, p)
		}
	}
	if k, u := strings.Join(kpaths, "\n"), strings.Join(upaths, "\n"); k != u {
		t.Errorf("left by rm -r, built by the kernel and by us:\n%s", btrfstest.LineDiff(k, u))
	}
	t.Logf("%d names left", len(kpaths))
	for i, r := range results {
		for _, p := range []string{"t", "t/sv1", "t/snap1"} {
			if r.Entries[p] != nil {
				t.Errorf("%s: %s still there", names[i], p)
			}
		}
		if r.Entries["src/big"] == nil || r.Entries["esrc"] == nil || r.Entries["snapout/c"] == nil {
			t.Errorf("%s: src/big, esrc or snapout/c gone", names[i])
		}
		if r.Entries["snapout/x"] != nil {
			t.Errorf("%s: snapout/x still there", names[i])
		}
	}
}

func copyImage(t *testing.T, img string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "copy.img")
	if out, err := exec.Command("cp", "--sparse=always", img, dst).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v\n%s", err, out)
	}
	return dst
}

func rmTreeBuildKernel(t *testing.T, img string) {
	dir := btrfstest.Mount(t, "", img)
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%q: %v\n%s", args, err, out)
		}
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	files := rmTreeFiles()
	dirs := rmTreeDirs(files)
	for _, sv := range rmTreeSubvols {
		must(os.MkdirAll(filepath.Join(dir, filepath.Dir(sv)), 0o755))
		run("btrfs", "subvolume", "create", filepath.Join(dir, sv))
	}
	for _, d := range dirs {
		must(os.MkdirAll(filepath.Join(dir, d), 0o755))
	}
	for p, b := range files {
		must(os.WriteFile(filepath.Join(dir, p), b, 0o644))
	}
	must(os.Symlink("../f1", filepath.Join(dir, "t/d/ln")))
	must(os.Link(filepath.Join(dir, "t/f1"), filepath.Join(dir, "t/d/hl")))
	for _, s := range rmTreeSnapshots {
		args := []string{"btrfs", "subvolume", "snapshot"}
		if s.ro {
			args = append(args, "-r")
		}
		run(append(args, filepath.Join(dir, s.src), filepath.Join(dir, s.dst))...)
	}
	for p, b := range rmTreeAfter {
		must(os.WriteFile(filepath.Join(dir, p), b, 0o644))
	}
	run("btrfs", "subvolume", "set-default", filepath.Join(dir, "t3/def"))
	btrfstest.Unmount(t, dir)
}

func rmTreeBuildOurs(t *testing.T, img string) {
	w, err := btrfs.OpenWritable(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	files := rmTreeFiles()
	for _, sv := range rmTreeSubvols {
		must(w.MkdirAll(filepath.Dir(sv), 0o755))
		_, err := w.CreateSubvolume(sv, nil)
		must(err)
	}
	for _, d := range rmTreeDirs(files) {
		if !isSubvolPath(d) {
			must(w.MkdirAll(d, 0o755))
		}
	}
	for p, b := range files {
		must(w.WriteFile(p, b, 0o644))
	}
	must(w.Symlink("../f1", "t/d/ln"))
	must(w.Link("t/f1", "t/d/hl"))
	for _, s := range rmTreeSnapshots {
		_, err := w.Snapshot(s.src, s.dst, &btrfs.SnapshotOptions{ReadOnly: s.ro})
		must(err)
	}
	for p, b := range rmTreeAfter {
		must(w.WriteFile(p, b, 0o644))
	}
	def, err := w.SubvolumeAt("t3/def")
	must(err)
	must(w.SetDefaultSubvolume(def))
	must(w.Close())
}

// rmTreeKernelRm runs rm -r on t2, t3 and t on a kernel mount and
// returns what the kernel shows afterwards.
func rmTreeKernelRm(t *testing.T, img string) *btrfstest.Tree {
	// The first read-write mount of an image no kernel has mounted
	// (uuid_tree_generation behind, as mkfs.btrfs leaves it too) rescans
	// the UUID tree in the background; a deletion racing that rescan gets
	// its UUID entry back (our check then finds an entry naming no
	// subvolume). The unmount waits for the rescan.
	btrfstest.Unmount(t, btrfstest.Mount(t, "subvolid=5", img))
	dir := btrfstest.Mount(t, "subvolid=5", img)
	for _, c := range []struct {
		name string
		want error
	}{{"t2", syscall.EROFS}, {"t3", syscall.EPERM}, {"snapout/x", nil}, {"t", nil}} {
		out, err := exec.Command("rm", "-r", filepath.Join(dir, c.name)).CombinedOutput()
		if (err == nil) != (c.want == nil) || c.want != nil && !strings.Contains(strings.ToLower(string(out)), c.want.Error()) {
			t.Errorf("kernel: rm -r %s: %v %q, want %v", c.name, err, out, c.want)
		}
	}
	// A commit wakes the cleaner; subvolume sync waits for its drops.
	for _, args := range [][]string{{"filesystem", "sync", dir}, {"subvolume", "sync", dir}} {
		if out, err := exec.Command("btrfs", args...).CombinedOutput(); err != nil {
			t.Fatalf("btrfs %q: %v\n%s", args, err, out)
		}
	}
	btrfstest.Unmount(t, dir)
	return rmTreeScan(t, img)
}

// rmTreeOurRm is rmTreeKernelRm with our RemoveAll: t2 and t3 are
// refused and left as they were.
func rmTreeOurRm(t *testing.T, img string, before *btrfstest.Tree) *btrfstest.Tree {
	w, err := btrfs.OpenWritable(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for _, c := range []struct {
		name string
		want error
	}{{"t2", syscall.EROFS}, {"t3", syscall.EPERM}, {"snapout/x", nil}, {"t", nil}} {
		if err := w.RemoveAll(c.name); !errors.Is(err, c.want) || (err == nil) != (c.want == nil) {
			t.Errorf("RemoveAll(%s): %v, want %v", c.name, err, c.want)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	after := rmTreeScan(t, img)
	in := func(p string) bool {
		return strings.HasPrefix(p, "t2/") || strings.HasPrefix(p, "t3/")
	}
	for _, d := range btrfstest.Diff(before, after, btrfstest.DiffOptions{CompareNlink: true, Filter: in}) {
		t.Errorf("refused RemoveAll changed t2 or t3: %s", d)
	}
	return after
}

// rmTreeScan is the kernel's view of the whole image (subvolid 5) and
// the subvolumes it lists, as entries "subvol:PATH".
func rmTreeScan(t *testing.T, img string) *btrfstest.Tree {
	dir := btrfstest.Mount(t, "ro,subvolid=5", img)
	defer btrfstest.Unmount(t, dir)
	tr, err := btrfstest.Scan(dir)
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("btrfs", "subvolume", "list", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("subvolume list: %v\n%s", err, out)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if i := strings.LastIndex(line, " path "); i >= 0 {
			tr.Entries["subvol:"+line[i+6:]] = &btrfstest.Entry{Type: btrfstest.TypeDir}
		}
	}
	return tr
}
