//go:build linux

package btrfs_test

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// TestSequentialWritesGrowOneExtent: writes that continue a file's last
// write of the transaction, in the file and on disk, extend its extent
// as the kernel's delayed allocation would write them, instead of adding
// one extent per write; an extent another item references (a clone), one
// of an earlier transaction and a partial sector are left alone. btrfs
// check and the kernel's reads agree with the model.
func TestSequentialWritesGrowOneExtent(t *testing.T) {
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{})
	fsys, err := btrfs.OpenWritable(img, &btrfs.Options{CommitInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	model := map[string][]byte{}
	write := func(name string, off, n int) {
		t.Helper()
		p := make([]byte, n)
		for i := range p {
			p[i] = byte(rng.Uint32())
		}
		if _, err := fsys.WriteAt(name, p, int64(off)); err != nil {
			t.Fatal(err)
		}
		b := model[name]
		if off+n > len(b) {
			b = append(b, make([]byte, off+n-len(b))...)
		}
		copy(b[off:], p)
		model[name] = b
	}
	extents := func(name string) []btrfs.FileExtent {
		t.Helper()
		exts, err := fsys.FileExtents(name)
		if err != nil {
			t.Fatal(err)
		}
		return exts
	}
	for _, n := range []string{"seq", "cloned", "dst", "partial"} {
		if err := fsys.WriteFile(n, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		model[n] = nil
	}
	for i := range 100 {
		write("seq", i*8192, 8192)
	}
	// A clone of the growing extent: the next write gets its own.
	for i := range 4 {
		write("cloned", i*8192, 8192)
	}
	if err := fsys.Clone("cloned", 0, "dst", 0, 8192); err != nil {
		t.Fatal(err)
	}
	model["dst"] = bytes.Clone(model["cloned"][:8192])
	write("cloned", 4*8192, 8192)
	// Unaligned appends rewrite their first sector: nothing to grow.
	for range 5 {
		write("partial", len(model["partial"]), 3000)
	}
	// Before the commit: the running transaction's extents, with what
	// its clone shares.
	if got := extents("seq"); len(got) != 1 || got[0].Length != 800<<10 || got[0].Shared {
		t.Fatalf("seq before the commit: %+v, want one extent of 800 KiB, not shared", got)
	}
	if got := extents("cloned"); len(got) != 2 || !got[0].Shared || got[1].Shared {
		t.Fatalf("cloned before the commit: %+v, want the cloned extent shared and the next not", got)
	}
	if err := fsys.Commit(); err != nil {
		t.Fatal(err)
	}
	if got := extents("cloned"); len(got) != 2 || !got[0].Shared || got[1].Shared {
		t.Fatalf("cloned after the commit: %+v, want the cloned extent shared and the next not", got)
	}
	if got := extents("seq"); len(got) != 1 || got[0].Length != 800<<10 {
		t.Fatalf("seq: %+v, want one extent of 800 KiB", got)
	}
	if got := extents("cloned"); len(got) != 2 {
		t.Fatalf("cloned: %+v, want two extents (the cloned one and the write after the clone)", got)
	}
	// Across a commit: a new extent, which the next writes grow.
	for i := 100; i < 110; i++ {
		write("seq", i*8192, 8192)
	}
	// An overwrite inside the grown extent: the rest stays (a bookend).
	write("seq", 40*8192, 8192)
	if err := fsys.Commit(); err != nil {
		t.Fatal(err)
	}
	if got := extents("seq"); len(got) != 4 {
		t.Fatalf("seq: %+v, want four extents (two parts of the first, the overwrite, the 10 appends)", got)
	}
	for n, want := range model {
		got, err := fsys.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%s: read back differs", n)
		}
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	btrfstest.Check(t, []string{img}, true)
	if btrfstest.Interop() {
		compareMounted(t, img, model)
	}
}
