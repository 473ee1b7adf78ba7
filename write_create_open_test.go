package btrfs_test

import (
	"bytes"
	"errors"
	"io/fs"
	"syscall"
	"testing"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// TestCreateOpen: CreateOpen makes the file and returns it open, as
// open(2) with O_CREAT|O_EXCL: its Stat is the new inode's, the File
// stats, writes and reads it from the start (before and after other
// changes), follows it across a rename, and fails with the name's error
// (no File) where CreateEmptyStat does. The image passes btrfs check and
// holds what was written.
func TestCreateOpen(t *testing.T) {
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{Size: 256 << 20})
	fsys, err := btrfs.OpenWritable(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	if err := fsys.Mkdir("d", 0o755); err != nil {
		t.Fatal(err)
	}
	f, st, err := fsys.CreateOpen("d/a", 0o640, &btrfs.CreateOptions{UID: 1000, GID: 100})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	want, err := fsys.Lstat("d/a")
	if err != nil {
		t.Fatal(err)
	}
	ws := want.Sys().(*btrfs.Stat)
	if st.Ino != ws.Ino || st.Subvolume != ws.Subvolume || st.Mode != ws.Mode || st.UID != 1000 || st.GID != 100 || st.Size != 0 {
		t.Fatalf("CreateOpen's Stat %+v, Lstat %+v", st, ws)
	}
	fi, err := f.Stat() // the first read of the File loads the inode
	if err != nil || fi.Size() != 0 || fi.Sys().(*btrfs.Stat).Ino != st.Ino {
		t.Fatalf("File.Stat: %v, %v", fi, err)
	}
	data := bytes.Repeat([]byte("create+open "), 1000)
	if _, err := f.WriteAt(data[:5000], 0); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(data[5000:], 5000); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(data))
	if n, err := f.ReadAt(got, 0); n != len(data) || !bytes.Equal(got, data) {
		t.Fatalf("File.ReadAt: %d bytes (%v)", n, err)
	}
	if err := fsys.Rename("d/a", "d/b"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("tail"), int64(len(data))); err != nil {
		t.Fatal(err)
	}
	data = append(data, "tail"...)
	if b, err := fsys.ReadFile("d/b"); err != nil || !bytes.Equal(b, data) {
		t.Fatalf("ReadFile after the rename: %d bytes (%v), want %d", len(b), err, len(data))
	}
	if fi, err := f.Stat(); err != nil || fi.Size() != int64(len(data)) {
		t.Fatalf("File.Stat after writes: %v, %v", fi, err)
	}
	for _, c := range []struct {
		name string
		want error
	}{
		{"d/b", fs.ErrExist},
		{"nodir/x", fs.ErrNotExist},
		{"d/b/x", syscall.ENOTDIR},
	} {
		g, gst, err := fsys.CreateOpen(c.name, 0o644, nil)
		if !errors.Is(err, c.want) || g != nil || gst != nil {
			t.Errorf("CreateOpen %s: %v, %v, %v; want %v and no File", c.name, g, gst, err, c.want)
		}
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	btrfstest.Check(t, []string{img}, true)
	ro, err := btrfs.Open(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if b, err := ro.ReadFile("d/b"); err != nil || !bytes.Equal(b, data) {
		t.Fatalf("after reopening: %d bytes (%v), want %d", len(b), err, len(data))
	}
	if _, _, err := ro.CreateOpen("c", 0o644, nil); err == nil {
		t.Error("CreateOpen on a read-only FS succeeded")
	}
}
