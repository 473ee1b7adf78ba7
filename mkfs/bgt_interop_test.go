package mkfs

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// TestFormatBlockGroupTree formats with -O block-group-tree: btrfs check
// (6.2, and 6.19 where GOBTRFS_PROGS_DIR names it) is clean, the block
// group items are in tree 11 and not in the extent tree, the kernel
// mounts it and writes 10 MiB, check stays clean, and our writer adds
// more on top (new data chunks, whose items go into tree 11).
func TestFormatBlockGroupTree(t *testing.T) {
	btrfstest.RequireInterop(t)
	for _, tc := range []struct {
		name string
		opts Options
	}{
		{"default", Options{Features: []string{"block-group-tree"}}},
		{"n4k-single", Options{NodeSize: 4096, MetadataProfile: "single", Features: []string{"block_group_tree"}}},
		{"datadup-xxhash", Options{DataProfile: "dup", Csum: btrfs.CsumXXHash, Features: []string{"bgt"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "fs.img")
			o := tc.opts
			o.Size = 256 << 20
			if err := Format(p, o); err != nil {
				t.Fatal(err)
			}
			checkBoth(t, p)
			out, err := exec.Command("btrfs", "inspect-internal", "dump-tree", "-t", "11", p).CombinedOutput()
			if err != nil || strings.Count(string(out), "BLOCK_GROUP_ITEM") != 3 {
				t.Errorf("block group tree: %v\n%s", err, out)
			}
			out, err = exec.Command("btrfs", "inspect-internal", "dump-tree", "-t", "2", p).CombinedOutput()
			if err != nil || strings.Contains(string(out), "BLOCK_GROUP_ITEM") {
				t.Errorf("extent tree holds block group items: %v\n%s", err, out)
			}
			dir := btrfstest.Mount(t, "", p)
			writeSome(t, dir)
			btrfstest.Unmount(t, dir)
			checkBoth(t, p)
			w, err := btrfs.OpenWritable(p, nil)
			if err != nil {
				t.Fatal(err)
			}
			info, err := w.Info()
			if err != nil || !slices.Contains(info.CompatRO, "BLOCK_GROUP_TREE") {
				t.Fatalf("compat_ro %v (%v), want BLOCK_GROUP_TREE", info.CompatRO, err)
			}
			data := bytes.Repeat([]byte("ours after the kernel "), 1<<20)[:20<<20]
			if err := w.WriteFile("ours", data, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			checkBoth(t, p)
			dir = btrfstest.Mount(t, "ro", p)
			got, err := os.ReadFile(filepath.Join(dir, "ours"))
			if err != nil || !bytes.Equal(got, data) {
				t.Errorf("the kernel reads %d bytes (%v), want the %d written", len(got), err, len(data))
			}
			if _, err := os.Stat(filepath.Join(dir, "d0", "e0", "f")); err != nil {
				t.Errorf("the kernel's file: %v", err)
			}
		})
	}
}

// TestShrinkBlockGroupTree writes a file that needs a DATA chunk past the
// ones mkfs made (at the end of the device), removes it and shrinks: the
// emptied group is removed and the one before it cut, their items leave
// or change in tree 11; check is clean and the kernel reads the rest.
func TestShrinkBlockGroupTree(t *testing.T) {
	btrfstest.RequireInterop(t)
	p := filepath.Join(t.TempDir(), "fs.img")
	if err := Format(p, Options{Size: 256 << 20}); err != nil {
		t.Fatal(err)
	}
	w, err := btrfs.OpenWritable(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.WriteFile("keep", []byte("kept\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteFile("ours", bytes.Repeat([]byte("x"), 14<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	count := func() int {
		info, err := w.Info()
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, g := range info.BlockGroups {
			if g.Type == "DATA" {
				n++
			}
		}
		return n
	}
	before := count()
	if err := w.Remove("ours"); err != nil {
		t.Fatal(err)
	}
	size, err := w.Shrink()
	if err != nil {
		t.Fatal(err)
	}
	after := count()
	t.Logf("shrunk to %d bytes: %d DATA groups before, %d after", size, before, after)
	if after >= before {
		t.Errorf("%d DATA groups after freeing the last ones and shrinking, %d before", after, before)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	checkBoth(t, p)
	dir := btrfstest.Mount(t, "ro", p)
	if b, err := os.ReadFile(filepath.Join(dir, "keep")); err != nil || string(b) != "kept\n" {
		t.Errorf("the kernel reads %q (%v) after shrinking", b, err)
	}
}

// checkBoth runs btrfs check with data checksums: the installed one and,
// where GOBTRFS_PROGS_DIR names it, btrfs-progs 6.19's.
func checkBoth(t *testing.T, img string) {
	t.Helper()
	btrfstest.Check(t, []string{img}, true)
	btrfstest.CheckNewer(t, img, true)
}

// TestParseFeaturesBlockGroupTree: the names and aliases of the
// block-group tree, and mkfs.btrfs 6.19's rule that it needs no-holes and
// the free-space tree.
func TestParseFeaturesBlockGroupTree(t *testing.T) {
	for _, tc := range []struct {
		names []string
		bgt   bool
		warn  bool
	}{
		{[]string{"block-group-tree"}, true, false},
		{[]string{"BGT"}, true, false},
		{[]string{"block_group_tree"}, true, false},
		{[]string{"bgt", "^bgt"}, false, false},
		{[]string{"bgt,^free-space-tree"}, false, true},
		{[]string{"^no-holes", "block-group-tree"}, false, true},
	} {
		f, w, err := parseFeatures(tc.names)
		if err != nil {
			t.Errorf("%q: %v", tc.names, err)
			continue
		}
		if f.bgt != tc.bgt || (len(w) > 0) != tc.warn {
			t.Errorf("%q: bgt %v warnings %q, want %v and warning %v", tc.names, f.bgt, w, tc.bgt, tc.warn)
		}
		if got := FeatureWarnings(tc.names); !slices.Equal(got, w) {
			t.Errorf("%q: FeatureWarnings %q, want %q", tc.names, got, w)
		}
	}
}
