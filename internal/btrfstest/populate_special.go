//go:build linux

package btrfstest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// PopulateSpecial creates dir/special with symlinks (short, absolute, to a
// directory, dangling, and one with a ~4000-byte target, shortened only as
// far as the node size requires), a fifo, a unix socket bound by the
// kernel, and character and block device nodes, including large
// major/minor numbers.
func PopulateSpecial(tb testing.TB, dir string, seed int64) {
	tb.Helper()
	p := newPopulator(tb, dir, "special", seed)
	p.mkdir("d", 0o755)
	p.write("d/target", []byte("target\n"))
	p.symlink("d/target", "short")
	p.symlink("/etc/passwd", "absolute")
	p.symlink("d", "dirlink")
	p.symlink("does/not/exist", "dangling")
	p.symlink("..", "dotdot")
	p.longSymlink("long")
	p.mknod("fifo", unix.S_IFIFO, 0o644, 0, 0)
	p.socket("socket")
	for _, n := range []struct {
		name         string
		mode         uint32
		major, minor uint32
	}{
		{"null", unix.S_IFCHR, 1, 3},
		{"sda1", unix.S_IFBLK, 8, 1},
		{"chr-big", unix.S_IFCHR, 259, 65536},
		{"blk-max", unix.S_IFBLK, 4095, 1<<20 - 1},
		{"chr-zero", unix.S_IFCHR, 0, 0},
	} {
		p.mknod(n.name, n.mode, 0o640, n.major, n.minor)
	}
	p.stampTimes()
}

func (p *populator) symlink(target, rel string) {
	p.tb.Helper()
	p.check(os.Symlink(target, p.path(rel)))
}

// longSymlink makes a symlink with a target of about 4000 bytes. btrfs
// stores a target inline in one leaf, so small node sizes cap it lower
// (3949 bytes with 4 KiB nodes); then the longest target the filesystem
// accepts is used, found by bisection, which makes the exact limit part of
// the tree.
func (p *populator) longSymlink(rel string) {
	p.tb.Helper()
	var parts []string
	for i := 0; len(strings.Join(parts, "/")) < 4000; i++ {
		parts = append(parts, fmt.Sprintf("component-%03d-%s", i, strings.Repeat("x", 20)))
	}
	target := strings.Join(parts, "/")[:4000]
	try := func(n int) bool {
		err := os.Symlink(target[:n], p.path(rel))
		if err != nil && !errors.Is(err, unix.ENAMETOOLONG) {
			p.tb.Fatal(err)
		}
		return err == nil
	}
	if try(len(target)) {
		return
	}
	lo, hi := 1, len(target) // try(lo) would succeed, try(hi) fails
	for hi-lo > 1 {
		if mid := (lo + hi) / 2; try(mid) {
			p.check(os.Remove(p.path(rel)))
			lo = mid
		} else {
			hi = mid
		}
	}
	if !try(lo) {
		p.tb.Fatalf("symlink %s: no target length accepted", p.path(rel))
	}
}

// socket creates a unix socket file by binding a socket. The socket
// address is limited to 107 bytes, which test directories exceed, so it
// binds to /proc/self/fd/N/name, where N is an open descriptor of the
// parent directory.
func (p *populator) socket(rel string) {
	p.tb.Helper()
	dfd, err := unix.Open(filepath.Dir(p.path(rel)), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	p.check(err)
	defer unix.Close(dfd)
	sfd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	p.check(err)
	defer unix.Close(sfd)
	addr := "/proc/self/fd/" + strconv.Itoa(dfd) + "/" + filepath.Base(rel)
	if err := unix.Bind(sfd, &unix.SockaddrUnix{Name: addr}); err != nil {
		p.tb.Fatalf("bind %s (as %s): %v", p.path(rel), addr, err)
	}
	p.check(unix.Chmod(p.path(rel), 0o755)) // bind applied the umask
}

// PopulateNames creates dir/names with names that stress name handling: a
// 255-byte name (the maximum) for a file and for a directory, UTF-8 names
// in several scripts, names that are not valid UTF-8, and names with
// spaces, quotes, newlines, backslashes, '=' and a leading dash.
func PopulateNames(tb testing.TB, dir string, seed int64) {
	tb.Helper()
	p := newPopulator(tb, dir, "names", seed)
	long := strings.Repeat("n", 250) + "-255."
	long = long[:255]
	p.write(long, []byte("longest name\n"))
	dlong := "d" + long[1:]
	p.mkdir(dlong, 0o755)
	p.write(dlong+"/inside", p.random(100))
	names := []string{
		"héllo wörld", "日本語のファイル", "emoji-😀", "Ωμέγα", "кириллица",
		"bad-\xff\xfe-utf8", "latin1-caf\xe9", "truncated-\xe6\x97",
		"with space", "with\"quote", "with'apos", "with\nnewline", "with\\backslash",
		"key=value", "-leading-dash", "tab\there", "#hash", ".hidden", "...",
	}
	for i, n := range names {
		p.write(n, p.random(10+i))
	}
	// A directory with a non-UTF-8 name holding a file with one, too.
	p.mkdir("dir-\x80\x81", 0o755)
	p.write("dir-\x80\x81/f-\xc0", p.random(7))
	p.stampTimes()
}
