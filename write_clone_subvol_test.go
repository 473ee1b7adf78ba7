//go:build linux

package btrfs_test

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// TestCloneAcrossSubvolumesInterop clones (FICLONE/FICLONERANGE, as the
// kernel allows within one filesystem) between subvolume trees: from a
// subvolume into another, from the top level into a subvolume and back,
// out of a read-only snapshot, into a writable snapshot, a range into
// the middle of a file, and an inline source (copied). Each extent gains
// a reference of the destination's tree, inode and offset. After the
// commit btrfs check --check-data-csum (6.2, and 6.19 where present) is
// clean, the kernel reads every destination as its source, FIEMAP shows
// the destinations on the source's blocks, shared; the kernel then
// overwrites a clone and removes a source, and we delete the subvolume
// holding clones, with check staying clean.
func TestCloneAcrossSubvolumesInterop(t *testing.T) {
	btrfstest.RequireInterop(t)
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	img := formatTemp(t, 512<<20)
	w, err := btrfs.OpenWritable(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	random := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	big := random(3<<20 + 5000) // several extents, a tail that is not a whole sector
	mid := random(256 << 10)
	for _, name := range []string{"a", "b", "c"} {
		_, err := w.CreateSubvolume(name, nil)
		must(err)
	}
	must(w.WriteFile("a/big", big, 0o644))
	must(w.WriteFile("a/mid", mid, 0o644))
	must(w.WriteFile("a/inline", []byte("small and inline"), 0o644))
	must(w.WriteFile("topfile", mid, 0o644))
	must(w.WriteFile("b/target", bytes.Repeat([]byte{7}, 1<<20), 0o644))
	must(w.Commit())
	_, err = w.Snapshot("a", "a-ro", &btrfs.SnapshotOptions{ReadOnly: true})
	must(err)
	_, err = w.Snapshot("c", "c-rw", nil)
	must(err)
	must(w.Commit())

	empty := func(name string) {
		t.Helper()
		must(w.WriteFile(name, nil, 0o644))
	}
	want := map[string][]byte{}
	empty("b/big")
	must(w.Clone("a/big", 0, "b/big", 0, 0)) // a whole file, between subvolumes
	want["b/big"] = big
	empty("b/from-ro")
	must(w.Clone("a-ro/mid", 0, "b/from-ro", 0, 0)) // out of a read-only snapshot
	want["b/from-ro"] = mid
	empty("a-top")
	must(w.Clone("b/big", 0, "a-top", 0, 0)) // into the top level
	want["a-top"] = big
	empty("b/from-top")
	must(w.Clone("topfile", 0, "b/from-top", 0, 0)) // from the top level
	want["b/from-top"] = mid
	must(w.Clone("a/big", 1<<20, "b/target", 256<<10, 512<<10)) // a range into the middle
	tgt := bytes.Repeat([]byte{7}, 1<<20)
	copy(tgt[256<<10:], big[1<<20:1<<20+512<<10])
	want["b/target"] = tgt
	empty("b/inline")
	must(w.Clone("a/inline", 0, "b/inline", 0, 0)) // inline: copied
	want["b/inline"] = []byte("small and inline")
	empty("c-rw/snapclone")
	switch err := w.Clone("a/big", 0, "c-rw/snapclone", 0, 0); {
	case err == nil:
		want["c-rw/snapclone"] = big
	case errors.Is(err, btrfs.ErrUnsupported):
		t.Logf("into a writable snapshot: %v", err)
		must(w.Remove("c-rw/snapclone"))
	default:
		t.Fatalf("clone into a writable snapshot: %v", err)
	}
	// The kernel's refusals stay: a read-only destination, misaligned
	// offsets.
	if err := w.Clone("b/big", 0, "a-ro/mid", 0, 0); !errors.Is(err, syscall.EROFS) {
		t.Errorf("clone into a read-only snapshot: %v, want EROFS", err)
	}
	if err := w.Clone("a/big", 100, "b/target", 0, 4096); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("misaligned clone: %v, want EINVAL", err)
	}
	for name, data := range want {
		if got, err := w.ReadFile(name); err != nil || !bytes.Equal(got, data) {
			t.Errorf("%s before the commit: %d bytes, %v", name, len(got), err)
		}
	}
	must(w.Close())
	btrfstest.Check(t, []string{img}, true)
	btrfstest.CheckNewer(t, img, true)

	dir := btrfstest.Mount(t, "ro,subvolid=5", img)
	for name, data := range want {
		if got, err := os.ReadFile(filepath.Join(dir, name)); err != nil || !bytes.Equal(got, data) {
			t.Errorf("the kernel's %s: %d bytes, %v", name, len(got), err)
		}
	}
	// The whole-file clones lie on their sources' blocks, shared.
	for dst, src := range map[string]string{"b/big": "a/big", "b/from-ro": "a-ro/mid", "a-top": "a/big", "b/from-top": "topfile"} {
		se, de := btrfstest.Fiemap(t, filepath.Join(dir, src)), btrfstest.Fiemap(t, filepath.Join(dir, dst))
		if len(de) == 0 || len(de) != len(se) {
			t.Errorf("%s: %d extents, %s: %d", dst, len(de), src, len(se))
			continue
		}
		for i := range de {
			if de[i].Physical != se[i].Physical || !de[i].Shared {
				t.Errorf("%s extent %d: %+v, source's %+v", dst, i, de[i], se[i])
			}
		}
	}
	btrfstest.Unmount(t, dir)

	// The kernel overwrites a clone and removes a source.
	dir = btrfstest.Mount(t, "subvolid=5", img)
	f, err := os.OpenFile(filepath.Join(dir, "b/big"), os.O_WRONLY, 0)
	must(err)
	_, err = f.WriteAt(bytes.Repeat([]byte{1}, 8192), 4096)
	must(err)
	must(f.Close())
	must(os.Remove(filepath.Join(dir, "a/mid")))
	btrfstest.Unmount(t, dir)
	btrfstest.Check(t, []string{img}, true)

	// We delete the subvolume holding most clones.
	w, err = btrfs.OpenWritable(img, nil)
	must(err)
	must(w.DeleteSubvolume("b"))
	if got, err := w.ReadFile("a-top"); err != nil || !bytes.Equal(got, big) {
		t.Errorf("a-top after b went: %d bytes, %v", len(got), err)
	}
	must(w.Close())
	btrfstest.Check(t, []string{img}, true)
	btrfstest.CheckNewer(t, img, true)
}
