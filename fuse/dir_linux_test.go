//go:build linux

package fuse_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// dirent is one entry as getdents64 returns it.
type dirent struct {
	name string
	ino  uint64
	typ  uint8
}

// getdents reads entries from the open directory fd with a buffer of
// size bytes, until the end or max entries (0: no limit).
func getdents(t *testing.T, fd int, size, max int) []dirent {
	t.Helper()
	var out []dirent
	buf := make([]byte, size)
	for max == 0 || len(out) < max {
		n, err := syscall.Getdents(fd, buf)
		if err != nil {
			t.Fatalf("getdents: %v", err)
		}
		if n == 0 {
			break
		}
		for b := buf[:n]; len(b) > 0; {
			reclen := int(binary.LittleEndian.Uint16(b[16:]))
			name := b[19:reclen]
			if i := bytes.IndexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			out = append(out, dirent{name: string(name), ino: binary.LittleEndian.Uint64(b), typ: b[18]})
			b = b[reclen:]
		}
	}
	return out
}

// listing is getdents of the whole directory dir, one entry per line.
func listing(t *testing.T, dir string) string {
	t.Helper()
	fd, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	var b strings.Builder
	for _, e := range getdents(t, fd, 4096, 0) {
		fmt.Fprintf(&b, "%s ino %d type %d\n", e.name, e.ino, e.typ)
	}
	return b.String()
}

// TestMountReaddir reads directories through the mount with getdents:
// names, inode numbers and types as the kernel's mount of the same image
// shows them, the attributes READDIRPLUS gives each entry as stat shows
// them, and a listing read while names go, move and come.
func TestMountReaddir(t *testing.T) {
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{})
	m := mountImage(t, img, nil, nil)
	dir := filepath.Join(m.dir, "d")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// More entries than one 4 KiB READDIRPLUS reply holds, of every
	// size, and a directory, a symlink and a FIFO.
	const files = 300
	for i := range files {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%03d", i)), bytes.Repeat([]byte("x"), i), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, err := range []error{
		os.Mkdir(filepath.Join(dir, "sub"), 0o700),
		os.Symlink("f001", filepath.Join(dir, "link")),
		syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o600),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	// Drop the kernel's dentries and attributes, so what stat shows
	// next comes from READDIRPLUS replies.
	if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("2"), 0); err != nil {
		t.Logf("drop_caches: %v (stat may be served from older entries)", err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != files+3 {
		t.Fatalf("ReadDir: %d entries, want %d", len(ents), files+3)
	}
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		var want int64
		if _, err := fmt.Sscanf(e.Name(), "f%03d", &want); err == nil && fi.Size() != want {
			t.Errorf("%s: size %d, want %d", e.Name(), fi.Size(), want)
		}
	}

	// A listing read while names change: the first entries, then one
	// name goes, one moves to a name of its own and one is replaced by
	// another file; the rest of the listing shows what the names hold
	// then.
	fd, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	closeDir := func() {
		if !closed {
			closed = true
			syscall.Close(fd)
		}
	}
	// Before the unmount of a failed test, which waits while it is open.
	t.Cleanup(closeDir)
	first := getdents(t, fd, 1024, 1)
	if len(first) == 0 || len(first) > 50 {
		t.Fatalf("first getdents: %d entries", len(first))
	}
	for _, err := range []error{
		os.Remove(filepath.Join(dir, "f200")),
		os.Rename(filepath.Join(dir, "f201"), filepath.Join(dir, "moved")),
		os.Rename(filepath.Join(dir, "f001"), filepath.Join(dir, "f202")),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	rest := getdents(t, fd, 1024, 0)
	seen := map[string]bool{}
	for i, e := range append(first, rest...) {
		if seen[e.name] {
			t.Errorf("%s listed twice", e.name)
		}
		seen[e.name] = true
		if i < len(first) || e.name == "." || e.name == ".." {
			// Read before the changes.
			continue
		}
		if e.name == "f200" || e.name == "f201" {
			t.Errorf("%s listed after it went", e.name)
			continue
		}
		var st syscall.Stat_t
		if err := syscall.Lstat(filepath.Join(dir, e.name), &st); err != nil {
			t.Errorf("lstat %s: %v", e.name, err)
			continue
		}
		if e.ino != st.Ino {
			t.Errorf("%s: getdents inode %d, lstat %d", e.name, e.ino, st.Ino)
		}
	}
	if !seen["f202"] {
		t.Errorf("f202 (replaced while listed) missing")
	}
	// rewinddir reads the directory anew.
	if err := os.WriteFile(filepath.Join(dir, "late"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := syscall.Seek(fd, 0, 0); err != nil {
		t.Fatal(err)
	}
	again := getdents(t, fd, 4096, 0)
	if !slices.ContainsFunc(again, func(e dirent) bool { return e.name == "late" }) {
		t.Errorf("rewound listing lacks a name made after the first read")
	}
	closeDir()

	ours, top := listing(t, dir), listing(t, m.dir)
	m.unmount(t)
	btrfstest.Check(t, []string{img}, false)
	kdir := btrfstest.Mount(t, "ro", img)
	if want := listing(t, filepath.Join(kdir, "d")); ours != want {
		t.Errorf("getdents through our mount differs from the kernel's:\n%s", btrfstest.LineDiff(want, ours))
	}
	if want := listing(t, kdir); top != want {
		t.Errorf("getdents of the top through our mount differs from the kernel's:\n%s", btrfstest.LineDiff(want, top))
	}
}
