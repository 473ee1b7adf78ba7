package cli

import (
	"context"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
	"github.com/gobtrfs/btrfs/internal/extract"
)

// TestInteropSubvolumes compares `gobtrfs subvolume list` with `btrfs
// subvolume list` on a kernel mount, and every subvolume opened by id with
// the kernel's mount of that subvolume.
func TestInteropSubvolumes(t *testing.T) {
	btrfstest.RequireInterop(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{})
	mnt := btrfstest.Mount(t, "", img)
	btrfstest.PopulateSubvolumes(t, mnt, 7, true)
	btrfstest.Unmount(t, mnt)

	mnt = btrfstest.Mount(t, "ro,subvolid=5", img)
	for _, flags := range [][]string{nil, {"-p"}, {"-u", "-q", "-R"}} {
		progs, err := exec.Command("btrfs", append(append([]string{"subvolume", "list"}, flags...), mnt)...).CombinedOutput()
		if err != nil {
			t.Fatalf("btrfs subvolume list: %v\n%s", err, progs)
		}
		ours, stderr, code := run(t, append(append([]string{"subvolume", "list"}, flags...), img)...)
		if code != 0 {
			t.Fatalf("gobtrfs subvolume list: exit %d: %s", code, stderr)
		}
		if ours != string(progs) {
			t.Errorf("subvolume list %v differs:\nbtrfs-progs:\n%s\ngobtrfs:\n%s", flags, progs, ours)
		}
	}
	progsDefault, err := exec.Command("btrfs", "subvolume", "get-default", mnt).Output()
	if err != nil {
		t.Fatal(err)
	}
	btrfstest.Unmount(t, mnt)

	fsys, err := btrfs.Open(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	def, err := fsys.DefaultSubvolume()
	if err != nil || !strings.HasPrefix(string(progsDefault), "ID "+strconv.FormatUint(def, 10)+" ") {
		t.Errorf("DefaultSubvolume = %d, %v; btrfs says %q", def, err, progsDefault)
	}
	subs, err := fsys.Subvolumes()
	if err != nil || len(subs) < 4 {
		t.Fatalf("Subvolumes: %d, %v", len(subs), err)
	}
	for _, s := range subs {
		id, err := fsys.SubvolumeAt(s.Path)
		if err != nil || id != s.ID {
			t.Errorf("SubvolumeAt(%q) = %d, %v; want %d", s.Path, id, err, s.ID)
		}
		view, err := fsys.Subvolume(s.ID)
		if err != nil {
			t.Fatal(err)
		}
		out := t.TempDir() + "/x"
		if _, err := extract.Run(context.Background(), view, ".", out, extract.Options{}); err != nil {
			t.Fatalf("extract subvolume %d: %v", s.ID, err)
		}
		got, err := btrfstest.Scan(out)
		if err != nil {
			t.Fatal(err)
		}
		kmnt := btrfstest.Mount(t, "ro,subvolid="+strconv.FormatUint(s.ID, 10), img)
		want, err := btrfstest.Scan(kmnt)
		if err != nil {
			t.Fatal(err)
		}
		btrfstest.Unmount(t, kmnt)
		for _, d := range btrfstest.Diff(want, got, btrfstest.DiffOptions{IgnoreXattr: func(n string) bool { return strings.HasPrefix(n, "btrfs.") }}) {
			t.Errorf("subvolume %d (%s): %s", s.ID, s.Path, d)
		}
	}
}
