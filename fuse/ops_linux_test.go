//go:build linux

package fuse_test

import (
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/fuse"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// TestMountOps checks through the mount what posixtest does not:
// renameat2 flags, copy_file_range (reflinked when aligned, copied when
// not), SEEK_DATA/SEEK_HOLE, punch hole, XATTR_CREATE/REPLACE, a file
// written and read after its last name went, and that no trace of it is
// left; then btrfs check and the kernel's view of the result.
func TestMountOps(t *testing.T) {
	requireFUSE(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{})
	m := mountImage(t, img, nil, nil)
	p := func(name string) string { return filepath.Join(m.dir, name) }
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	read := func(name string) string {
		t.Helper()
		b, err := os.ReadFile(p(name))
		must(err)
		return string(b)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	random := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}

	// renameat2
	must(os.WriteFile(p("a"), []byte("A"), 0o644))
	must(os.WriteFile(p("b"), []byte("B"), 0o644))
	must(os.Mkdir(p("d"), 0o755))
	if err := unix.Renameat2(unix.AT_FDCWD, p("a"), unix.AT_FDCWD, p("b"), unix.RENAME_NOREPLACE); err != unix.EEXIST {
		t.Errorf("RENAME_NOREPLACE onto a file: %v, want EEXIST", err)
	}
	must(unix.Renameat2(unix.AT_FDCWD, p("a"), unix.AT_FDCWD, p("b"), unix.RENAME_EXCHANGE))
	if read("a") != "B" || read("b") != "A" {
		t.Errorf("RENAME_EXCHANGE: a=%q b=%q", read("a"), read("b"))
	}
	must(unix.Renameat2(unix.AT_FDCWD, p("d"), unix.AT_FDCWD, p("a"), unix.RENAME_EXCHANGE))
	if fi, err := os.Stat(p("a")); err != nil || !fi.IsDir() || read("d") != "B" {
		t.Errorf("RENAME_EXCHANGE of a directory and a file: %v %v", fi, err)
	}
	must(unix.Renameat2(unix.AT_FDCWD, p("b"), unix.AT_FDCWD, p("a/moved"), unix.RENAME_NOREPLACE))

	// copy_file_range: aligned (a clone) and not (a copy).
	src := random(1<<20 + 1000)
	must(os.WriteFile(p("src"), src, 0o644))
	copyRange := func(dst string, offIn, offOut int64, n int) {
		t.Helper()
		in, err := os.Open(p("src"))
		must(err)
		defer in.Close()
		out, err := os.OpenFile(p(dst), os.O_RDWR|os.O_CREATE, 0o644)
		must(err)
		defer out.Close()
		for done := 0; done < n; {
			c, err := unix.CopyFileRange(int(in.Fd()), &offIn, int(out.Fd()), &offOut, n-done, 0)
			must(err)
			if c == 0 {
				t.Fatalf("copy_file_range to %s: 0 after %d of %d", dst, done, n)
			}
			done += c
		}
	}
	copyRange("clone", 0, 0, len(src))
	copyRange("copy", 10, 3, 5000)
	if got := read("clone"); got != string(src) {
		t.Errorf("clone differs from its source (%d bytes, want %d)", len(got), len(src))
	}
	if got := read("copy"); got != "\x00\x00\x00"+string(src[10:5010]) {
		t.Errorf("unaligned copy_file_range: wrong data (%d bytes)", len(got))
	}

	// SEEK_DATA / SEEK_HOLE and punch hole.
	f, err := os.Create(p("holes"))
	must(err)
	_, err = f.WriteAt(random(8192), 0)
	must(err)
	_, err = f.WriteAt(random(4096), 1<<20)
	must(err)
	fd := int(f.Fd())
	if off, err := unix.Seek(fd, 0, unix.SEEK_HOLE); err != nil || off != 8192 {
		t.Errorf("SEEK_HOLE from 0: %d, %v; want 8192", off, err)
	}
	if off, err := unix.Seek(fd, 8192, unix.SEEK_DATA); err != nil || off != 1<<20 {
		t.Errorf("SEEK_DATA from 8192: %d, %v; want 1 MiB", off, err)
	}
	must(unix.Fallocate(fd, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, 0, 4096))
	if off, err := unix.Seek(fd, 0, unix.SEEK_DATA); err != nil || off != 4096 {
		t.Errorf("SEEK_DATA after punching the first sector: %d, %v; want 4096", off, err)
	}
	must(f.Close())

	// XATTR_CREATE / XATTR_REPLACE
	must(unix.Setxattr(p("src"), "user.k", []byte("v"), unix.XATTR_CREATE))
	if err := unix.Setxattr(p("src"), "user.k", []byte("w"), unix.XATTR_CREATE); err != unix.EEXIST {
		t.Errorf("XATTR_CREATE of an existing attribute: %v, want EEXIST", err)
	}
	if err := unix.Setxattr(p("src"), "user.none", []byte("w"), unix.XATTR_REPLACE); err != unix.ENODATA {
		t.Errorf("XATTR_REPLACE of a missing attribute: %v, want ENODATA", err)
	}

	// A file used after its last name went.
	f, err = os.Create(p("gone"))
	must(err)
	_, err = f.Write([]byte("before"))
	must(err)
	must(os.Remove(p("gone")))
	_, err = f.Write([]byte(" after"))
	must(err)
	var st syscall.Stat_t
	must(syscall.Fstat(int(f.Fd()), &st))
	got := make([]byte, 12)
	if _, err := f.ReadAt(got, 0); err != nil || string(got) != "before after" || st.Nlink != 0 || st.Size != 12 {
		t.Errorf("removed open file: read %q, %v; nlink %d size %d", got, err, st.Nlink, st.Size)
	}
	names, err := os.ReadDir(m.dir)
	must(err)
	for _, e := range names {
		if e.Name() == ".gobtrfs-orphans" || e.Name() == "gone" {
			t.Errorf("the mount lists %s", e.Name())
		}
	}
	must(f.Close())

	want, err := btrfstest.Scan(m.dir)
	must(err)
	m.unmount(t)
	btrfstest.Check(t, []string{img}, true)
	kmnt := btrfstest.Mount(t, "ro", img)
	if _, err := os.Lstat(filepath.Join(kmnt, ".gobtrfs-orphans")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the orphan directory is left after unmount: %v", err)
	}
	kgot, err := btrfstest.Scan(kmnt)
	must(err)
	diff(t, want, kgot, btrfstest.DiffOptions{IgnoreXattr: ignoreBtrfsXattrs, CompareNlink: true})
	// The aligned copy shares its source's extents: FIEMAP says so.
	if _, err := exec.LookPath("filefrag"); err == nil {
		out, err := exec.Command("filefrag", "-v", filepath.Join(kmnt, "clone")).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "shared") {
			t.Errorf("copy_file_range of aligned ranges did not share extents:\n%s%v", out, err)
		}
	}
}

// TestMountSubvol mounts a nested subvolume by path and by id, writes
// through it, and checks that the kernel's subvol= mount shows the same;
// on a mount of the top level, the subvolume's inode numbers do not meet
// the top level's.
func TestMountSubvol(t *testing.T) {
	requireFUSE(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{})
	fsys, err := btrfs.OpenWritable(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	id, err := fsys.CreateSubvolume("sv", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := fsys.WriteFile("sv/f", []byte("in sv"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}

	m := mountImage(t, img, &fuse.Options{Subvol: "/sv"}, nil)
	if b, err := os.ReadFile(filepath.Join(m.dir, "f")); err != nil || string(b) != "in sv" {
		t.Fatalf("subvol=/sv: f reads %q, %v", b, err)
	}
	if err := os.WriteFile(filepath.Join(m.dir, "g"), []byte("new"), 0o600); err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(m.dir, &st); err != nil || st.Ino != 256 {
		t.Errorf("the subvolume's root directory: inode %d, %v; want 256", st.Ino, err)
	}
	want, err := btrfstest.Scan(m.dir)
	if err != nil {
		t.Fatal(err)
	}
	m.unmount(t)

	m = mountImage(t, img, &fuse.Options{SubvolID: id, ReadOnly: true}, nil)
	got, err := btrfstest.Scan(m.dir)
	if err != nil {
		t.Fatal(err)
	}
	diff(t, want, got, btrfstest.DiffOptions{})
	m.unmount(t)

	m = mountImage(t, img, &fuse.Options{ReadOnly: true}, nil)
	var top, sub syscall.Stat_t
	if err := syscall.Stat(m.dir, &top); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Stat(filepath.Join(m.dir, "sv"), &sub); err != nil {
		t.Fatal(err)
	}
	if top.Ino != 256 || sub.Ino == 256 || sub.Ino>>63 != 1 {
		t.Errorf("inode numbers: top level %d, subvolume root %#x; want 256 and a number of the subvolume range", top.Ino, sub.Ino)
	}
	m.unmount(t)

	btrfstest.Check(t, []string{img}, true)
	kmnt := btrfstest.Mount(t, "ro,subvol=sv", img)
	kgot, err := btrfstest.Scan(kmnt)
	if err != nil {
		t.Fatal(err)
	}
	diff(t, want, kgot, btrfstest.DiffOptions{})
	if want.Entries["g"] == nil {
		t.Errorf("g is missing from our mount's scan")
	}
}

// TestMountMultiDevice mounts a two-device RAID1 filesystem read-write
// (the other device given as btrfs.Options.Devices, as -d does), writes
// through it, and checks the result with btrfs check and the kernel.
func TestMountMultiDevice(t *testing.T) {
	requireFUSE(t)
	devs := btrfstest.MkfsMulti(t, btrfstest.MkfsOptions{NumDevices: 2, DataProfile: "raid1", MetadataProfile: "raid1"})
	m := mountImage(t, devs[0], nil, &btrfs.Options{Devices: devs[1:]})
	btrfstest.PopulateFiles(t, m.dir, 5)
	want, err := btrfstest.Scan(m.dir)
	if err != nil {
		t.Fatal(err)
	}
	m.unmount(t)
	btrfstest.Check(t, devs, true)
	kmnt := btrfstest.Mount(t, "ro", devs...)
	got, err := btrfstest.Scan(kmnt)
	if err != nil {
		t.Fatal(err)
	}
	diff(t, want, got, btrfstest.DiffOptions{CompareNlink: true})
}
