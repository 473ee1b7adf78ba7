package btrfs_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
	"github.com/gobtrfs/btrfs/internal/disk"
)

// TestPrepareShared writes files with PrepareShared and WritePrepared,
// with and without compression, in the test's temporary directory (the
// host may refuse to share) and on a btrfs the kernel mounts (it must
// share every whole sector): the files read back, shared extents are
// not compressed while inline ones still may be, the counters add up
// to the whole sectors of the non-inline files, and btrfs check passes
// with data checksums. Writes the sharing does not fit (an unaligned
// offset, a NODATASUM file) are still right.
func TestPrepareShared(t *testing.T) {
	for _, where := range []string{"tmp", "btrfs"} {
		for _, comp := range []string{"", "zstd"} {
			t.Run(where+"/compress="+comp, func(t *testing.T) {
				dir := t.TempDir()
				if where == "btrfs" {
					btrfstest.RequireInterop(t)
					dir = btrfstest.Mount(t, "", btrfstest.Mkfs(t, btrfstest.MkfsOptions{}))
				}
				testPrepareShared(t, dir, comp, where == "btrfs")
			})
		}
	}
}

func testPrepareShared(t *testing.T, dir, comp string, mustShare bool) {
	btrfstest.RequireProgs(t)
	img := filepath.Join(dir, "img") // sparse, beside the sources
	mustOK(t, os.WriteFile(img, nil, 0o644))
	mustOK(t, os.Truncate(img, 256<<20))
	if out, err := exec.Command("mkfs.btrfs", "-q", img).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.btrfs: %v\n%s", err, out)
	}
	fsys, err := btrfs.OpenWritable(img, &btrfs.Options{Compress: comp})
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	rng := rand.New(rand.NewSource(2))
	want := map[string][]byte{}
	var shareable int64
	for i, n := range preparedSizes {
		name := fmt.Sprintf("f%02d", i)
		data := preparedContent(rng, n, false) // compressible: only sharing keeps it plain
		src := filepath.Join(dir, name+".src")
		if err := os.WriteFile(src, data, 0o644); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(src)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		pd, err := fsys.PrepareShared(data, f, 0)
		mustOK(t, err)
		mustOK(t, fsys.CreateEmpty(name, 0o644))
		if k, err := fsys.WritePrepared(name, pd, 0); err != nil || k != n {
			t.Fatalf("WritePrepared %s: %d, %v", name, k, err)
		}
		want[name] = data
		if n > 2048 {
			shareable += int64(n) &^ 4095
		}
	}
	// An offset inside a sector: written, with the bytes before it read.
	data := preparedContent(rng, 9000, true)
	f, err := os.Open(filepath.Join(dir, "f00.src"))
	mustOK(t, err)
	defer f.Close()
	pd, err := fsys.PrepareShared(data, f, 0)
	mustOK(t, err)
	mustOK(t, fsys.WriteFile("unaligned", []byte("head"), 0o644))
	if _, err := fsys.WritePrepared("unaligned", pd, 1000); err != nil {
		t.Fatal(err)
	}
	want["unaligned"] = append(append([]byte("head"), make([]byte, 996)...), data...)
	// NODATASUM: no checksums, the sharing is kept.
	mustOK(t, fsys.CreateEmpty("nosum", 0o644))
	mustOK(t, fsys.SetInodeFlags("nosum", uint64(disk.InodeNoDataSum), 0))
	big := filepath.Join(dir, fmt.Sprintf("f%02d.src", len(preparedSizes)-1))
	bf, err := os.Open(big)
	mustOK(t, err)
	defer bf.Close()
	bdata, err := io.ReadAll(bf)
	mustOK(t, err)
	pd, err = fsys.PrepareShared(bdata, bf, 0)
	mustOK(t, err)
	if _, err := fsys.WritePrepared("nosum", pd, 0); err != nil {
		t.Fatal(err)
	}
	want["nosum"] = bdata
	shareable += int64(len(bdata)) &^ 4095
	if _, err := fsys.PrepareShared(data, nil, 0); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("PrepareShared without a file: %v, want EINVAL", err)
	}
	mustOK(t, fsys.Commit())

	for name, w := range want {
		r, err := fsys.Open(name)
		mustOK(t, err)
		got, err := io.ReadAll(r)
		r.Close()
		if err != nil || !bytes.Equal(got, w) {
			t.Fatalf("%s reads back %d bytes (%v), want %d", name, len(got), err, len(w))
		}
		if name == "unaligned" {
			continue
		}
		exts, err := fsys.FileExtents(name)
		mustOK(t, err)
		for _, e := range exts {
			if e.Compressed && !e.Inline {
				t.Errorf("%s: shared data stored compressed: %+v", name, e)
			}
		}
	}
	wc, err := fsys.WriteCounters()
	mustOK(t, err)
	t.Logf("shared %d, not shared %d, written %d", wc.DeviceBytesShared, wc.DeviceBytesNotShared, wc.DeviceBytesWritten)
	if wc.DeviceBytesShared+wc.DeviceBytesNotShared != shareable {
		t.Errorf("shared %d + not shared %d bytes, want %d", wc.DeviceBytesShared, wc.DeviceBytesNotShared, shareable)
	}
	if mustShare && wc.DeviceBytesNotShared != 0 {
		t.Errorf("the btrfs host refused %d bytes", wc.DeviceBytesNotShared)
	}
	mustOK(t, fsys.Close())
	btrfstest.Check(t, []string{img}, true)
}
