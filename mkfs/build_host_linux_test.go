//go:build linux

package mkfs

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// The host-side fixtures of the build tests make device nodes, sockets,
// xattrs and foreign owners with Linux system calls.

// populateHost fills dir with every kind of entry the builder handles.
func populateHost(t *testing.T, dir string, seed uint64) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, seed^0x6d6b6673))
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	p := func(rel string) string { return filepath.Join(dir, rel) }
	must(os.MkdirAll(p("d1/d2/d3"), 0o755))
	must(os.Mkdir(p("sticky"), 0o1777))
	must(os.Mkdir(p("with space\nand newline"), 0o700))
	rnd := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.UintN(256))
		}
		return b
	}
	must(os.WriteFile(p("small"), []byte("small file\n"), 0o644))
	must(os.WriteFile(p("empty"), nil, 0o600))
	must(os.WriteFile(p("d1/d2/d3/deep"), rnd(5000), 0o640))
	must(os.WriteFile(p("big"), rnd(20<<20), 0o644))
	must(os.WriteFile(p("with space\nand newline/"+strings.Repeat("L", 255)), rnd(100), 0o644))
	f, err := os.Create(p("holes"))
	must(err)
	for _, off := range []int64{0, 1 << 20, 3<<20 + 4096} {
		_, err := f.WriteAt(rnd(8192), off)
		must(err)
	}
	must(f.Truncate(6 << 20)) // trailing hole
	must(f.Close())
	f, err = os.Create(p("leading-hole"))
	must(err)
	_, err = f.WriteAt(rnd(4096), 2<<20)
	must(err)
	must(f.Close())
	must(os.WriteFile(p("all-hole"), nil, 0o644))
	must(os.Truncate(p("all-hole"), 1<<20))
	must(os.WriteFile(p("setuid"), []byte("#!/bin/sh\n"), 0o755))
	must(unix.Chmod(p("setuid"), 0o6755))
	must(os.Link(p("small"), p("d1/hardlink")))
	must(os.Link(p("small"), p("d1/d2/hardlink2")))
	must(os.Symlink("small", p("sym")))
	must(os.Symlink(strings.Repeat("x/", 1000)+"t", p("d1/longsym")))
	must(os.Symlink("/nonexistent/dangling", p("dangling")))
	must(unix.Mkfifo(p("fifo"), 0o644))
	must(unix.Mknod(p("chr"), unix.S_IFCHR|0o600, int(unix.Mkdev(1, 3))))
	must(unix.Mknod(p("blk"), unix.S_IFBLK|0o660, int(unix.Mkdev(259, 70000))))
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	must(err)
	must(unix.Bind(fd, &unix.SockaddrUnix{Name: p("sock")}))
	unix.Close(fd)
	must(unix.Setxattr(p("small"), "user.mime", []byte("text/plain"), 0))
	must(unix.Setxattr(p("small"), "trusted.bin", []byte{0, 1, 2, 255}, 0))
	must(unix.Setxattr(p("d1"), "user.dir", []byte("on a directory"), 0))
	must(unix.Setxattr(p("setuid"), "security.test", []byte("sec"), 0))
	must(unix.Lchown(p("d1/d2"), 1000, 1000))
	must(unix.Lchown(p("sym"), 1001, 1002))
	must(unix.Chown(p("fifo"), 42, 43))
	// Times last, deepest first, so creating entries does not move them.
	var paths []string
	filepath.Walk(dir, func(path string, _ os.FileInfo, err error) error {
		paths = append(paths, path)
		return err
	})
	for i := len(paths) - 1; i >= 0; i-- {
		ns := int64(1_500_000_000)*1e9 + int64(rng.Uint64N(1e17))
		ts := []unix.Timespec{unix.NsecToTimespec(ns - 1e9), unix.NsecToTimespec(ns)}
		must(unix.UtimesNanoAt(unix.AT_FDCWD, paths[i], ts, unix.AT_SYMLINK_NOFOLLOW))
	}
}

// TestBuildRootdirPopulated copies the harness's random tree (files of
// every extent shape, compressed data, names, modes, links, xattrs,
// special files, subvolumes and snapshots as plain directories), made by
// the kernel on a btrfs mount, with small transactions.
func TestBuildRootdirPopulated(t *testing.T) {
	btrfstest.RequireInterop(t)
	seed := int64(testSeed(t))
	src := btrfstest.Mount(t, "", btrfstest.Mkfs(t, btrfstest.MkfsOptions{}))
	btrfstest.PopulateAll(t, src, seed, btrfstest.PopulateOptions{BigDir: os.Getenv("GOBTRFS_LONG") == "1"})
	// POSIX ACLs (system.posix_acl_*) and btrfs.compression properties
	// are xattrs the write path does not take yet (Setxattr: EOPNOTSUPP
	// outside user., trusted., security.), so the source loses them.
	filepath.Walk(src, func(p string, _ os.FileInfo, _ error) error {
		for _, x := range []string{"btrfs.compression", "system.posix_acl_access", "system.posix_acl_default"} {
			unix.Lremovexattr(p, x)
		}
		return nil
	})
	want, err := btrfstest.Scan(src)
	if err != nil {
		t.Fatal(err)
	}
	img := buildImage(t, dirOpener(src), BuildOptions{CommitEntries: 100, Format: Options{Size: 1 << 30}})
	verify(t, img, want, btrfstest.DiffOptions{CompareNlink: true})
}
