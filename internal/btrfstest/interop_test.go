package btrfstest_test

import (
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// TestPopulateRemount is the harness's own proof: everything PopulateAll
// creates survives an unmount and a fresh mount exactly as Scan saw it
// before, btrfs check (with data checksums) accepts the image, and the
// default-subvolume mount shows the subtree Sub predicts.
func TestPopulateRemount(t *testing.T) {
	btrfstest.RequireInterop(t)
	t.Parallel()
	seed := testSeed(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{Label: "populate"})
	dir := btrfstest.Mount(t, "", img)
	btrfstest.PopulateAll(t, dir, seed, btrfstest.PopulateOptions{BigDir: !testing.Short(), SetDefault: true})
	before := scan(t, dir)
	btrfstest.Unmount(t, dir)

	dir = btrfstest.Mount(t, "subvolid=5", img)
	after := scan(t, dir)
	if d := btrfstest.Diff(before, after, btrfstest.DiffOptions{CompareNlink: true}); len(d) > 0 {
		t.Errorf("tree changed across remount (%d differences):\n%s", len(d), strings.Join(d, "\n"))
	}
	requireSome(t, after)
	btrfstest.Unmount(t, dir)

	dir = btrfstest.Mount(t, "ro", img)
	if d := btrfstest.Diff(after.Sub("subvols/sv/nested"), scan(t, dir), btrfstest.DiffOptions{}); len(d) > 0 {
		t.Errorf("default subvolume mount differs from subvols/sv/nested:\n%s", strings.Join(d, "\n"))
	}
	btrfstest.Unmount(t, dir)
	btrfstest.Check(t, []string{img}, true)
	requireOnDisk(t, img)
}

// requireOnDisk asserts, with btrfs-progs' dump-tree, that the populated
// image holds the on-disk structures PopulateAll promises: extended inode
// refs, inline and regular extents of every compression type, preallocated
// extents, and several subvolume trees.
func requireOnDisk(t *testing.T, img string) {
	t.Helper()
	out, err := exec.Command("btrfs", "inspect-internal", "dump-tree", img).CombinedOutput()
	if err != nil {
		t.Fatalf("dump-tree: %v\n%.2000s", err, out)
	}
	dump := string(out)
	for _, want := range []string{
		"INODE_EXTREF",
		"type 2 (prealloc)",
		"(258 ROOT_ITEM ", // the third subvolume (ids start at 256)
	} {
		if !strings.Contains(dump, want) {
			t.Errorf("image has no %q in dump-tree", want)
		}
	}
	for _, algo := range []string{"1 (zlib)", "2 (lzo)", "3 (zstd)"} {
		if !strings.Contains(dump, "extent compression "+algo) {
			t.Errorf("image has no regular extent with compression %s", algo)
		}
		if !regexp.MustCompile(`inline extent data size \d+ ram_bytes \d+ compression ` + regexp.QuoteMeta(algo)).MatchString(dump) {
			t.Errorf("image has no inline extent with compression %s", algo)
		}
	}
}

func scan(t *testing.T, dir string) *btrfstest.Tree {
	t.Helper()
	tree, err := btrfstest.Scan(dir)
	if err != nil {
		t.Fatal(err)
	}
	return tree
}

// requireSome asserts that the populated tree really holds the kinds of
// content it is meant to, so a silently failing populate step is caught.
func requireSome(t *testing.T, tree *btrfstest.Tree) {
	t.Helper()
	want := map[string]btrfstest.FileType{
		"files/large-3MiB":       btrfstest.TypeRegular,
		"special/fifo":           btrfstest.TypeFifo,
		"special/socket":         btrfstest.TypeSocket,
		"special/null":           btrfstest.TypeCharDev,
		"special/sda1":           btrfstest.TypeBlockDev,
		"special/long":           btrfstest.TypeSymlink,
		"subvols/snap-ro/delete": btrfstest.TypeRegular,
		"subvols/snap-ro/nested": btrfstest.TypeDir,
	}
	for p, typ := range want {
		if e := tree.Entries[p]; e == nil || e.Type != typ {
			t.Errorf("%s: want a %v, got %+v", p, typ, e)
		}
	}
	if e := tree.Entries["special/chr-big"]; e == nil || e.RdevMajor != 259 || e.RdevMinor != 65536 {
		t.Errorf("special/chr-big: want rdev 259:65536, got %+v", e)
	}
	if e := tree.Entries["xattrs/many"]; e == nil || len(e.Xattrs) != 100 {
		t.Errorf("xattrs/many: want 100 xattrs, got %+v", e)
	}
	if e := tree.Entries["extents/sparse"]; e == nil || len(e.Data) != 2 {
		t.Errorf("extents/sparse: want 2 data ranges, got %+v", e)
	}
	if _, ok := tree.Entries["subvols/sv/delete"]; ok {
		t.Error("subvols/sv/delete exists, want it deleted after the snapshot")
	}
	var extref []string
	for _, g := range tree.Links {
		if strings.HasPrefix(g[0], "links/extref/") {
			extref = g
		}
	}
	if len(extref) != btrfstest.ExtrefLinks+1 {
		t.Errorf("links/extref: hardlink group of %d paths, want %d", len(extref), btrfstest.ExtrefLinks+1)
	}
}
