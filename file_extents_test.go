package btrfs_test

import (
	"bytes"
	"errors"
	"io/fs"
	"testing"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// TestFileExtentsSpace checks FileExtents (inline, plain, preallocated,
// shared by a clone, holes left out), Space against Info's block groups,
// and SubvolumeInfoOf for the top level and a missing id.
func TestFileExtentsSpace(t *testing.T) {
	btrfstest.RequireProgs(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{})
	fsys, err := btrfs.OpenWritable(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	data := bytes.Repeat([]byte{1, 2, 3, 4, 5, 6, 7}, 40000)
	for _, step := range []error{
		fsys.WriteFile("small", []byte("inline"), 0o644),
		fsys.WriteFile("big", data, 0o644),
		fsys.WriteFile("alone", data[:8192], 0o644),
		fsys.CreateEmpty("clone", 0o644),
		fsys.Clone("big", 0, "clone", 1<<20, 64<<10),
		fsys.CreateEmpty("pre", 0o644),
		fsys.Fallocate("pre", 0, 8192, false),
	} {
		if step != nil {
			t.Fatal(step)
		}
	}
	if err := fsys.Commit(); err != nil {
		t.Fatal(err)
	}
	check := func(name string, want func([]btrfs.FileExtent) bool) {
		t.Helper()
		exts, err := fsys.FileExtents(name)
		if err != nil || !want(exts) {
			t.Errorf("FileExtents(%s) = %+v, %v", name, exts, err)
		}
	}
	check("small", func(e []btrfs.FileExtent) bool { return len(e) == 1 && e[0].Inline && e[0].Length == 6 })
	check("alone", func(e []btrfs.FileExtent) bool {
		return len(e) == 1 && !e[0].Shared && e[0].Length == 8192 && e[0].DiskAddr != 0
	})
	check("big", func(e []btrfs.FileExtent) bool { return len(e) > 0 && e[0].Shared })
	check("clone", func(e []btrfs.FileExtent) bool { return len(e) == 1 && e[0].Shared && e[0].Offset == 1<<20 })
	check("pre", func(e []btrfs.FileExtent) bool { return len(e) == 1 && e[0].Prealloc && !e[0].Shared })
	if _, err := fsys.FileExtents("missing"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("FileExtents(missing): %v", err)
	}

	space, err := fsys.Space()
	if err != nil {
		t.Fatal(err)
	}
	info, err := fsys.Info()
	if err != nil {
		t.Fatal(err)
	}
	var total, groups uint64
	for _, s := range space {
		if s.Type != "GlobalReserve" {
			total += s.Total
		}
	}
	for _, g := range info.BlockGroups {
		groups += g.Length
	}
	if total != groups || space[len(space)-1].Type != "GlobalReserve" || space[len(space)-1].Total == 0 {
		t.Errorf("Space = %+v; block groups hold %d bytes", space, groups)
	}
	top, err := fsys.SubvolumeInfoOf(5)
	if err != nil || top.ID != 5 || top.Path != "" || top.ParentID != 0 {
		t.Errorf("SubvolumeInfoOf(5) = %+v, %v", top, err)
	}
	if _, err := fsys.SubvolumeInfoOf(300); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("SubvolumeInfoOf(300): %v, want ErrNotExist", err)
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	btrfstest.Check(t, []string{img}, true)
}
