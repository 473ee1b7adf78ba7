package btrfs_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"testing"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// extentLayout lists inode 257's file extents in the top-level tree as
// dump-tree prints them: offset, type, and whether it is a hole.
func extentLayout(t *testing.T, img string) []string {
	t.Helper()
	out, err := exec.Command("btrfs", "inspect-internal", "dump-tree", "-t", "5", img).CombinedOutput()
	if err != nil {
		t.Fatalf("dump-tree: %v\n%s", err, out)
	}
	re := regexp.MustCompile(`key \(257 EXTENT_DATA (\d+)\)[^\n]*\n[^\n]*type \d+ \((\w+)\)\n[^\n]*disk byte (\d+)`)
	var l []string
	for _, m := range re.FindAllStringSubmatch(string(out), -1) {
		hole := ""
		if m[3] == "0" {
			hole = " hole"
		}
		l = append(l, m[1]+" "+m[2]+hole)
	}
	return l
}

// TestFallocatePastEOFHoles: without NO_HOLES, an allocation that starts
// past EOF gets hole extents from EOF to its start, KEEP_SIZE or not,
// exactly as the kernel lays them out.
func TestFallocatePastEOFHoles(t *testing.T) {
	btrfstest.RequireInterop(t)
	const size, off, n = 129329, 139264, 8192
	for _, keep := range []bool{true, false} {
		mk := btrfstest.MkfsOptions{Features: "^no-holes"}
		kimg := btrfstest.Mkfs(t, mk)
		mnt := btrfstest.Mount(t, "", kimg)
		p := filepath.Join(mnt, "f")
		if err := os.WriteFile(p, make([]byte, size), 0o644); err != nil {
			t.Fatal(err)
		}
		args := []string{"-o", "139264", "-l", "8192", p}
		if keep {
			args = append([]string{"-n"}, args...)
		}
		if out, err := exec.Command("fallocate", args...).CombinedOutput(); err != nil {
			t.Fatalf("fallocate: %v\n%s", err, out)
		}
		btrfstest.Unmount(t, mnt)

		img := btrfstest.Mkfs(t, mk)
		fsys, err := btrfs.OpenWritable(img, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, err := range []error{
			fsys.WriteFile("f", make([]byte, size), 0o644),
			fsys.Fallocate("f", off, n, keep),
			fsys.Close(),
		} {
			if err != nil {
				t.Fatal(err)
			}
		}
		btrfstest.Check(t, []string{img}, true)
		want, got := extentLayout(t, kimg), extentLayout(t, img)
		if !slices.Equal(got, want) || len(want) != 3 {
			t.Errorf("keep=%v: file extents\n ours   %q\n kernel %q", keep, got, want)
		}
	}
}
