package blockdev_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gobtrfs/btrfs/internal/blockdev"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

func TestFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "img")
	f, err := blockdev.CreateFile(path, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if f.Size() != 1<<20 || f.Name() != path {
		t.Fatalf("size %d name %s", f.Size(), f.Name())
	}
	p := []byte("hello")
	if _, err := f.WriteAt(p, 1<<20-5); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(p, 1<<20-4); !errors.Is(err, blockdev.ErrOutOfRange) {
		t.Fatalf("write past end: %v", err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if st, _ := os.Stat(path); st.Size() != 1<<20 {
		t.Fatalf("file grew to %d", st.Size())
	}

	ro, err := blockdev.OpenFile(path, true)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	got := make([]byte, 8)
	n, err := ro.ReadAt(got, 1<<20-5)
	if n != 5 || err != io.EOF || !bytes.Equal(got[:5], p) {
		t.Fatalf("short read at end: %d %v %q", n, err, got[:n])
	}
	if n, err := ro.ReadAt(got[:5], 1<<20-5); n != 5 || err != nil {
		t.Fatalf("exact read at end: %d %v", n, err)
	}
	if _, err := ro.WriteAt(p, 0); !errors.Is(err, blockdev.ErrReadOnly) {
		t.Fatalf("write to read-only: %v", err)
	}
	if _, err := blockdev.OpenFile(filepath.Join(t.TempDir(), "missing"), true); err == nil {
		t.Fatal("opened a missing file")
	}
}

func TestFileBlockDevice(t *testing.T) {
	btrfstest.RequireInterop(t)
	img := filepath.Join(t.TempDir(), "img")
	const size = 3<<20 + 512*7
	if err := os.WriteFile(img, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, size); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("losetup", "--find", "--show", img).CombinedOutput()
	if err != nil {
		t.Fatalf("losetup: %v %s", err, out)
	}
	loop := strings.TrimSpace(string(out))
	t.Cleanup(func() {
		if out, err := exec.Command("losetup", "-d", loop).CombinedOutput(); err != nil {
			t.Errorf("losetup -d %s: %v %s", loop, err, out)
		}
	})
	d, err := blockdev.OpenFile(loop, false)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if d.Size() != size {
		t.Fatalf("%s: size %d, want %d", loop, d.Size(), size)
	}
	if _, err := d.WriteAt(bytes.Repeat([]byte{9}, 4096), 4096); err != nil {
		t.Fatal(err)
	}
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 4096)
	if _, err := d.ReadAt(got, 4096); err != nil || got[0] != 9 || got[4095] != 9 {
		t.Fatalf("read back: %v", err)
	}
}
