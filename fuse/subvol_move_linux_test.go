//go:build linux

package fuse_test

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// TestMountSubvolumeMoves: through the mount, subvolumes are renamed
// (into another subvolume too), exchanged, removed by rmdir and rm -r,
// and copy_file_range clones between subvolumes, as on a kernel mount
// of btrfs; then btrfs check and the kernel's view.
func TestMountSubvolumeMoves(t *testing.T) {
	requireFUSE(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{})
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
	for _, sv := range []string{"sv", "o", "e", "tree", "tree/inner"} {
		_, err := w.CreateSubvolume(sv, nil)
		must(err)
	}
	data := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // 1 MiB
	must(w.WriteFile("sv/f", data, 0o644))
	must(w.WriteFile("tree/inner/g", []byte("g"), 0o644))
	must(w.WriteFile("file", []byte("file"), 0o644))
	must(w.Close())

	m := mountImage(t, img, nil, nil)
	p := func(name string) string { return filepath.Join(m.dir, name) }
	must(os.Rename(p("sv"), p("o/sv")))
	if err := unix.Renameat2(unix.AT_FDCWD, p("o/sv"), unix.AT_FDCWD, p("file"), unix.RENAME_EXCHANGE); !errors.Is(err, unix.EXDEV) {
		t.Errorf("exchange of a subvolume with a file of another subvolume: %v, want EXDEV", err)
	}
	must(os.Rename(p("o/sv"), p("sv2")))
	must(unix.Renameat2(unix.AT_FDCWD, p("sv2"), unix.AT_FDCWD, p("file"), unix.RENAME_EXCHANGE))
	if err := os.Remove(p("file")); !errors.Is(err, unix.ENOTEMPTY) {
		t.Errorf("rmdir of a subvolume with entries: %v", err)
	}
	must(os.Remove(p("e")))
	must(os.Remove(p("o"))) // empty since sv left it
	must(os.RemoveAll(p("tree")))
	// copy_file_range from the subvolume (now "file") into the top level.
	in, err := os.Open(p("file/f"))
	must(err)
	out, err := os.Create(p("copy"))
	must(err)
	n, err := unix.CopyFileRange(int(in.Fd()), nil, int(out.Fd()), nil, len(data), 0)
	if err != nil || n != len(data) {
		t.Errorf("copy_file_range: %d, %v", n, err)
	}
	in.Close()
	must(out.Close())
	for _, gone := range []string{"sv", "o", "e", "tree"} {
		if _, err := os.Lstat(p(gone)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: %v", gone, err)
		}
	}
	want, err := btrfstest.Scan(m.dir)
	must(err)
	m.unmount(t)

	btrfstest.Check(t, []string{img}, true)
	kmnt := btrfstest.Mount(t, "ro", img)
	got, err := btrfstest.Scan(kmnt)
	must(err)
	diff(t, want, got, btrfstest.DiffOptions{})
	if b, err := os.ReadFile(filepath.Join(kmnt, "copy")); err != nil || !bytes.Equal(b, data) {
		t.Errorf("the kernel's copy: %d bytes, %v", len(b), err)
	}
	if b, err := os.ReadFile(filepath.Join(kmnt, "sv2")); err != nil || string(b) != "file" {
		t.Errorf("the kernel's sv2 (the file exchanged): %q, %v", b, err)
	}
	ext := btrfstest.Fiemap(t, filepath.Join(kmnt, "copy"))
	src := btrfstest.Fiemap(t, filepath.Join(kmnt, "file/f"))
	if len(ext) == 0 || len(ext) != len(src) || ext[0].Physical != src[0].Physical || !ext[0].Shared {
		t.Errorf("copy_file_range across subvolumes did not share: %+v, source %+v", ext, src)
	}
}
