//go:build linux

package btrfstest_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// TestDiffDetectsKernelChanges changes a mounted filesystem through the
// kernel in the ways a reader bug would, and requires Diff of before/after
// scans to report each change.
func TestDiffDetectsKernelChanges(t *testing.T) {
	btrfstest.RequireInterop(t)
	t.Parallel()
	seed := testSeed(t)
	dir := btrfstest.Mount(t, "", btrfstest.Mkfs(t, btrfstest.MkfsOptions{}))
	btrfstest.PopulateFiles(t, dir, seed)
	btrfstest.PopulateLinks(t, dir, seed)
	btrfstest.PopulateXattrs(t, dir, seed)
	steps := []struct {
		name   string
		change func(t *testing.T)
		want   string
	}{
		{"mtime", func(t *testing.T) {
			ts := []unix.Timespec{unix.NsecToTimespec(1), unix.NsecToTimespec(123456789)}
			must(t, unix.UtimesNanoAt(unix.AT_FDCWD, dir+"/files/one", ts, 0))
		}, `"files/one": mtime: want`},
		{"content", func(t *testing.T) {
			f, err := os.OpenFile(dir+"/files/medium-300000", os.O_RDWR, 0)
			must(t, err)
			// The byte's complement: a fixed byte is already there in
			// one seed of 256 (the content is random), and then the
			// content does not change.
			b := make([]byte, 1)
			_, err = f.ReadAt(b, 150000)
			must(t, err)
			_, err = f.WriteAt([]byte{^b[0]}, 150000)
			must(t, err)
			must(t, f.Close())
		}, `"files/medium-300000": content sha256`},
		{"xattr", func(t *testing.T) {
			must(t, unix.Setxattr(dir+"/xattrs/many", "user.attr042", []byte("changed"), 0))
		}, `"xattrs/many": xattr "user.attr042": want`},
		{"hardlink", func(t *testing.T) {
			// Replace one link by an identical copy: same content, broken group.
			p := dir + "/links/b/across"
			data, err := os.ReadFile(p)
			must(t, err)
			must(t, os.Remove(p))
			must(t, os.WriteFile(p, data, 0o644))
		}, `hardlink group missing: {"links/a/across" "links/b/across" "links/c/across-renamed"}`},
	}
	before := scan(t, dir)
	for _, s := range steps {
		s.change(t)
		after := scan(t, dir)
		d := btrfstest.Diff(before, after, btrfstest.DiffOptions{})
		if !containsLine(d, s.want) {
			t.Errorf("%s: Diff = %q, want a line containing %q", s.name, d, s.want)
		}
		before = after
	}
}

func containsLine(lines []string, sub string) bool {
	for _, l := range lines {
		if strings.Contains(l, sub) {
			return true
		}
	}
	return false
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestCleanupLeavesNothing runs a subtest that attaches, mounts (single and
// multi-device), unmounts early, keeps a file open during cleanup, and then
// requires that no mount or loop device of it survives the subtest.
func TestCleanupLeavesNothing(t *testing.T) {
	btrfstest.RequireInterop(t)
	t.Parallel()
	var images, dirs []string
	t.Run("inner", func(t *testing.T) {
		img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{})
		multi := btrfstest.MkfsMulti(t, btrfstest.MkfsOptions{NumDevices: 2, DataProfile: "raid1", MetadataProfile: "raid1"})
		images = append([]string{img}, multi...)
		loop := btrfstest.Attach(t, img)
		early := btrfstest.Mount(t, "", loop)
		btrfstest.Unmount(t, early)
		d1 := btrfstest.Mount(t, "", loop) // the attached loop device, not owned by Mount
		d2 := btrfstest.Mount(t, "", multi...)
		dirs = []string{early, d1, d2}
		must(t, os.WriteFile(d2+"/f", []byte("raid1 data"), 0o644))
		// Busy when the cleanup starts, for a while: the unmount must retry.
		f, err := os.Open(d2 + "/f")
		must(t, err)
		go func() {
			time.Sleep(300 * time.Millisecond)
			f.Close()
		}()
	})
	mounts, err := os.ReadFile("/proc/self/mounts")
	must(t, err)
	for _, d := range dirs {
		if strings.Contains(string(mounts), " "+d+" ") {
			t.Errorf("%s still mounted", d)
		}
	}
	out, err := exec.Command("losetup", "-a").CombinedOutput()
	must(t, err)
	for _, img := range images {
		if strings.Contains(string(out), filepath.Dir(img)) {
			t.Errorf("loop device still attached to %s:\n%s", img, out)
		}
	}
}
