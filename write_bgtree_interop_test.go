package btrfs_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// bgtFixture is the committed image made with mkfs.btrfs 6.19's defaults
// (block-group tree on) and filled by the kernel.
const bgtFixture = "kernel-bgt-16k-crc32c"

// hasFeature reports whether names holds name.
func hasFeature(names []string, name string) bool {
	for _, n := range names {
		if n == name {
			return true
		}
	}
	return false
}

// dataGroups returns the start and used bytes of every DATA block group.
func dataGroups(t *testing.T, fsys *btrfs.FS) map[uint64]uint64 {
	t.Helper()
	info, err := fsys.Info()
	if err != nil {
		t.Fatal(err)
	}
	out := map[uint64]uint64{}
	for _, g := range info.BlockGroups {
		if g.Type == "DATA" {
			out[g.Start] = g.Used
		}
	}
	return out
}

// TestBlockGroupTreeWrite changes a filesystem whose block group items
// live in the block-group tree (tree 11): enough data that new data chunks
// are made (their items go into tree 11), then removals that lower a
// group's used bytes (its item in tree 11 is rewritten), over two commits.
// btrfs check (6.2, and 6.19 where GOBTRFS_PROGS_DIR names it) is clean,
// the kernel shows the fixture's files unchanged and ours with their
// contents, the kernel writes more and check stays clean, and we read the
// kernel's file back.
func TestBlockGroupTreeWrite(t *testing.T) {
	btrfstest.RequireInterop(t)
	img := btrfstest.OpenFixture(t, bgtFixture)
	devs := []string{img}
	fsys := openWritable(t, devs)
	info, err := fsys.Info()
	if err != nil {
		t.Fatal(err)
	}
	if !hasFeature(info.CompatRO, "BLOCK_GROUP_TREE") {
		t.Fatalf("fixture compat_ro %v, want BLOCK_GROUP_TREE", info.CompatRO)
	}
	before := dataGroups(t, fsys)
	r := rand.New(rand.NewChaCha8([32]byte{11}))
	sums := map[string]string{}
	if err := fsys.Mkdir("bgt", 0o755); err != nil {
		t.Fatal(err)
	}
	// 14 MiB in 2 MiB files: more than the 8 MiB data chunk mkfs made.
	for i := range 7 {
		data := make([]byte, 2<<20)
		for j := range data {
			data[j] = byte(r.Uint32())
		}
		name := fmt.Sprintf("bgt/f%d", i)
		if err := fsys.WriteFile(name, data, 0o644); err != nil {
			t.Fatalf("write %s: %v", name, err)
		}
		sum := sha256.Sum256(data)
		sums[name] = hex.EncodeToString(sum[:])
	}
	if err := fsys.Commit(); err != nil {
		t.Fatal(err)
	}
	mid := dataGroups(t, fsys)
	// The counters name tree 11, whose leaf the commit changed.
	wc, err := fsys.WriteCounters()
	if err != nil {
		t.Fatal(err)
	}
	if c, ok := wc.Trees["block_group"]; !ok || c.BlocksWritten == 0 {
		t.Errorf("write counters of the block group tree: %+v (present %v); trees %v", c, ok, wc.Trees)
	}
	if len(mid) <= len(before) {
		t.Fatalf("data block groups %v after writing 14 MiB, want more than %v", mid, before)
	}
	for _, name := range []string{"bgt/f1", "bgt/f4", "bgt/f5"} {
		if err := fsys.Remove(name); err != nil {
			t.Fatal(err)
		}
		delete(sums, name)
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	fsys = openWritable(t, devs)
	after := dataGroups(t, fsys)
	changed := 0
	for start, used := range after {
		if mid[start] != used {
			changed++
		}
	}
	if changed == 0 {
		t.Errorf("no data block group's used changed by the removals: %v", after)
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	btrfstest.Check(t, devs, true)
	btrfstest.CheckNewer(t, img, true)

	// The kernel shows the fixture unchanged and our files.
	dir := btrfstest.Mount(t, "", devs...)
	got, err := btrfstest.Scan(dir)
	if err != nil {
		t.Fatal(err)
	}
	ours := func(p string) bool { return p == "." || p == "bgt" || strings.HasPrefix(p, "bgt/") }
	opts := btrfstest.DiffOptions{CompareNlink: true, Filter: func(p string) bool { return !ours(p) }}
	if d := btrfstest.Diff(btrfstest.LoadManifest(t, bgtFixture), got, opts); len(d) > 0 {
		t.Errorf("the kernel shows the fixture changed:\n%s", strings.Join(d, "\n"))
	}
	var names []string
	for p := range got.Entries {
		if strings.HasPrefix(p, "bgt/") {
			names = append(names, p)
		}
	}
	if len(names) != len(sums) {
		t.Errorf("the kernel shows %v, want %d files", names, len(sums))
	}
	for name, sum := range sums {
		if e := got.Entries[name]; e == nil || e.SHA256 != sum {
			t.Errorf("%s: the kernel shows %+v, want sha256 %s", name, e, sum)
		}
	}
	// The kernel writes more: into the groups we made, and maybe new ones.
	kdata := bytes.Repeat([]byte("kernel wrote this\n"), 200000)
	if err := os.WriteFile(filepath.Join(dir, "bgt", "kernel"), kdata, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "bgt", "f0")); err != nil {
		t.Fatal(err)
	}
	btrfstest.Unmount(t, dir)
	btrfstest.Check(t, devs, true)
	btrfstest.CheckNewer(t, img, true)
	fsys = openWritable(t, devs)
	back, err := fsys.ReadFile("bgt/kernel")
	if err != nil || !bytes.Equal(back, kdata) {
		t.Errorf("reading the kernel's file back: %d bytes, %v", len(back), err)
	}
	// And we go on writing after the kernel.
	if err := fsys.WriteFile("bgt/again", kdata[:3<<20], 0o600); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	btrfstest.Check(t, devs, true)
	btrfstest.CheckNewer(t, img, true)

	// Everything of ours and the kernel's goes, and Shrink cuts the chunk
	// ending the device (6.19 leaves its bootstrap chunks' place at 1 MiB
	// free, where the new data chunks went, so it is the METADATA one):
	// its BLOCK_GROUP_ITEM in tree 11 is keyed anew.
	fsys = openWritable(t, devs)
	if err := fsys.RemoveAll("bgt"); err != nil {
		t.Fatal(err)
	}
	size, err := fsys.Shrink()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("shrunk to %d bytes", size)
	if uint64(size) >= info.TotalBytes {
		t.Errorf("shrunk to %d bytes from %d", size, info.TotalBytes)
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	btrfstest.Check(t, devs, true)
	btrfstest.CheckNewer(t, img, true)
	dir = btrfstest.Mount(t, "ro", devs...)
	got, err = btrfstest.Scan(dir)
	if err != nil {
		t.Fatal(err)
	}
	opts.Filter = func(p string) bool { return p != "." }
	if d := btrfstest.Diff(btrfstest.LoadManifest(t, bgtFixture), got, opts); len(d) > 0 {
		t.Errorf("after shrinking, the kernel shows something else than the fixture:\n%s", strings.Join(d, "\n"))
	}
}
