package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// TestSubvolumeSnapshot makes snapshots with gobtrfs (into a directory,
// under a new name, read-only) and compares btrfs-progs' output words,
// subvolume show and list -s with the kernel's mount of the same image;
// refused snapshots exit 1 and change nothing.
func TestSubvolumeSnapshot(t *testing.T) {
	btrfstest.RequireInterop(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{})
	ok(t, "subvolume", "create", img+":/sv")
	ok(t, "mkdir", img+":/snaps")
	src := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(src, []byte(strings.Repeat("data ", 5000)), 0o644); err != nil {
		t.Fatal(err)
	}
	ok(t, "cp", src, img+":/sv/f")
	if out := ok(t, "subvolume", "snapshot", img+":/sv", img+":/snaps"); out != "Create a snapshot of '"+img+":/sv' in '"+img+":/snaps/sv'\n" {
		t.Errorf("snapshot into a directory printed %q", out)
	}
	if out := ok(t, "subvolume", "snapshot", "-r", img+":/sv", img+":/ro"); out != "Create a readonly snapshot of '"+img+":/sv' in '"+img+":/ro'\n" {
		t.Errorf("read-only snapshot printed %q", out)
	}
	for _, bad := range [][]string{
		{img + ":/snaps", img + ":/x"},    // a directory, not a subvolume
		{img + ":/sv", img + ":/sv/in"},   // inside its own source
		{img + ":/none", img + ":/none2"}, // missing
	} {
		if _, _, code := run(t, append([]string{"subvolume", "snapshot"}, bad...)...); code != 1 {
			t.Errorf("snapshot %v: exit %d, want 1", bad, code)
		}
	}
	btrfstest.Check(t, []string{img}, true)

	mnt := btrfstest.Mount(t, "ro,subvolid=5", img)
	for _, p := range []string{"snaps/sv", "ro", "sv"} {
		want := progs(t, "btrfs", "subvolume", "show", mnt+"/"+p)
		if got := ok(t, "subvolume", "show", img+":/"+p); got != want {
			t.Errorf("subvolume show %s differs:\nbtrfs-progs:\n%s\ngobtrfs:\n%s", p, want, got)
		}
	}
	if want, got := progs(t, "btrfs", "subvolume", "list", "-s", mnt), ok(t, "subvolume", "list", "-s", img); got != want {
		t.Errorf("subvolume list -s differs:\nbtrfs-progs:\n%s\ngobtrfs:\n%s", want, got)
	}
	if b, err := os.ReadFile(mnt + "/ro/f"); err != nil || len(b) != 25000 {
		t.Errorf("ro/f on the kernel's mount: %d bytes, %v", len(b), err)
	}
}

// TestSubvolumeDelete deletes a snapshot by path and a subvolume by id
// with gobtrfs: progs' words, exit codes of the refusals, and the kernel
// no longer lists them; btrfs check is clean.
func TestSubvolumeDelete(t *testing.T) {
	btrfstest.RequireInterop(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{})
	ok(t, "subvolume", "create", img+":/sv", img+":/other", img+":/sv/nested")
	ok(t, "subvolume", "snapshot", "-r", img+":/other", img+":/snap")
	ok(t, "mkdir", img+":/d")
	if out := ok(t, "subvolume", "delete", img+":/snap"); out != "Delete subvolume (commit): '"+img+":/snap'\n" {
		t.Errorf("delete printed %q", out)
	}
	for _, bad := range []string{img + ":/d", img + ":/sv", img + ":/none"} {
		if _, _, code := run(t, "subvolume", "delete", bad); code != 1 {
			t.Errorf("delete %s: exit %d, want 1", bad, code)
		}
	}
	if out := ok(t, "subvolume", "delete", "-i", "258", img); out != "Delete subvolume (commit): '"+img+":/sv/nested'\n" {
		t.Errorf("delete -i printed %q", out)
	}
	ok(t, "subvolume", "snapshot", img+":/other", img+":/later")
	if out := ok(t, "subvolume", "delete", "--defer-drop", img+":/later"); out != "Delete subvolume (commit): '"+img+":/later'\n" {
		t.Errorf("delete --defer-drop printed %q", out)
	}
	// Left for the cleaner: the ROOT_ITEM with refs 0, an orphan item.
	if out := progs(t, "btrfs", "inspect-internal", "dump-tree", "-t", "root", img); !strings.Contains(out, "ORPHAN ORPHAN_ITEM ") {
		t.Errorf("--defer-drop left no orphan item:\n%s", out)
	}
	btrfstest.Check(t, []string{img}, true)
	mnt := btrfstest.Mount(t, "ro,subvolid=5", img)
	if out := progs(t, "btrfs", "subvolume", "list", mnt); strings.Contains(out, "snap") || strings.Contains(out, "nested") || strings.Contains(out, "later") || !strings.Contains(out, "path other") {
		t.Errorf("the kernel still lists deleted subvolumes:\n%s", out)
	}
}
