package disk

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Golden tests against real images: mkfs.btrfs --rootdir images, and images
// the kernel wrote through a loop mount. They skip when the tools (or root
// and loop devices) are missing, unless GOBTRFS_INTEROP=1 demands them.

const interopEnv = "GOBTRFS_INTEROP"

func interopUnavailable(t *testing.T, why string) {
	t.Helper()
	if os.Getenv(interopEnv) == "1" {
		t.Fatalf("interop test required (%s=1) but %s", interopEnv, why)
	}
	t.Skipf("skipping: %s (set %s=1 to require)", why, interopEnv)
}

func needPrograms(t *testing.T, names ...string) {
	t.Helper()
	for _, n := range names {
		if _, err := exec.LookPath(n); err != nil {
			interopUnavailable(t, n+" not found")
		}
	}
}

func needKernelMount(t *testing.T) {
	t.Helper()
	needPrograms(t, "mkfs.btrfs", "btrfs", "losetup", "mount", "umount", "cp")
	if os.Geteuid() != 0 {
		interopUnavailable(t, "not running as root")
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		interopUnavailable(t, "no loop devices")
	}
}

func runCmd(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func newImageFile(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(256 << 20); err != nil {
		t.Fatal(err)
	}
}

// compressible returns n bytes of repetitive text.
func compressible(n int) []byte {
	return bytes.Repeat([]byte("gobtrfs compresses this line well. "), n/35+1)[:n]
}

// buildMkfsImage makes an image with mkfs.btrfs --rootdir.
func buildMkfsImage(t *testing.T) string {
	needPrograms(t, "mkfs.btrfs", "btrfs")
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	r := testRand(t)
	for _, d := range []string{"src", "src/d1", "src/d1/d2"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, filepath.Join(src, "small.txt"), []byte("hello\n"))
	writeFile(t, filepath.Join(src, "big"), randBytes(r, 300000))
	writeFile(t, filepath.Join(src, "d1/text"), compressible(70000))
	writeFile(t, filepath.Join(src, "d1/d2/empty"), nil)
	_ = syscall.Setxattr(filepath.Join(src, "small.txt"), "user.color", []byte("red"), 0)
	if err := os.Symlink("small.txt", filepath.Join(src, "link")); err != nil {
		t.Fatal(err)
	}
	img := filepath.Join(dir, "mkfs.img")
	newImageFile(t, img)
	runCmd(t, "mkfs.btrfs", "-q", "-f", "--rootdir", src, img)
	return img
}

// buildKernelImage formats an image, loop-mounts it with zstd compression
// and lets the kernel write files, links, xattrs, special files, reflinks,
// prealloc, lzo/zlib extents, a subvolume with a snapshot changed on both
// sides, and quota items.
func buildKernelImage(t *testing.T) string {
	needKernelMount(t)
	dir := t.TempDir()
	img := filepath.Join(dir, "kernel.img")
	newImageFile(t, img)
	runCmd(t, "mkfs.btrfs", "-q", "-f", img)
	out, err := exec.Command("losetup", "-f", "--show", img).CombinedOutput()
	if err != nil {
		interopUnavailable(t, fmt.Sprintf("losetup failed: %v %s", err, out))
	}
	loop := strings.TrimSpace(string(out))
	t.Cleanup(func() { _ = exec.Command("losetup", "-d", loop).Run() })
	mnt := filepath.Join(dir, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	// A just-attached loop device can be busy for a moment (udev probes it).
	for try := 0; ; try++ {
		out, err := exec.Command("mount", "-o", "compress=zstd", loop, mnt).CombinedOutput()
		if err == nil {
			break
		}
		if try == 20 {
			interopUnavailable(t, fmt.Sprintf("mount failed: %v %s", err, out))
		}
		time.Sleep(100 * time.Millisecond)
	}
	mounted := true
	t.Cleanup(func() {
		if mounted {
			_ = exec.Command("umount", mnt).Run()
		}
	})
	populateKernelImage(t, mnt)
	runCmd(t, "umount", mnt)
	mounted = false
	return img
}

func populateKernelImage(t *testing.T, mnt string) {
	r := testRand(t)
	p := func(name string) string { return filepath.Join(mnt, name) }
	writeFile(t, p("zeros"), make([]byte, 300000))
	runCmd(t, "cp", "--reflink=always", p("zeros"), p("zeros2"))
	writeFile(t, p("small"), []byte("hi\n"))
	for name, v := range map[string][]byte{"user.color": []byte("red"), "user.big": compressible(3000)} {
		if err := syscall.Setxattr(p("small"), name, v, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(p("d"), 0o755); err != nil {
		t.Fatal(err)
	}
	// Three names in one directory share one INODE_REF item; the long
	// names overflow it into INODE_EXTREF items.
	for i := range 243 {
		name := fmt.Sprintf("hl%d", i)
		if i >= 3 {
			name = fmt.Sprintf("link_with_a_rather_long_name_to_fill_the_inode_ref_item_quickly_%04d", i)
		}
		if err := os.Link(p("small"), p("d/"+name)); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.Create(p("prealloc"))
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Fallocate(int(f.Fd()), 0, 0, 65536); err != nil {
		t.Fatal(err)
	}
	f.Close()
	for _, c := range []struct {
		name, algo string
		n          int
	}{{"lzo-inline", "lzo", 3000}, {"zlib-big", "zlib", 200000}, {"zstd-inline", "zstd", 2500}} {
		writeFile(t, p(c.name), nil)
		runCmd(t, "btrfs", "property", "set", p(c.name), "compression", c.algo)
		writeFile(t, p(c.name), compressible(c.n))
	}
	writeFile(t, p("random"), randBytes(r, 20000))
	// Distinct ids, mode bits, times and flags so swapped fields show.
	if err := os.Chown(p("random"), 1000, 2000); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Chmod(p("random"), 0o4751); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(p("random"), time.Unix(1500000000, 123456789), time.Unix(1600000000, 987654321)); err != nil {
		t.Fatal(err)
	}
	writeFile(t, p("append-only"), []byte("log\n"))
	runCmd(t, "chattr", "+a", p("append-only"))
	writeFile(t, p("nocow"), nil)
	runCmd(t, "chattr", "+C", p("nocow"))
	writeFile(t, p("nocow"), randBytes(r, 8192))
	if err := os.Symlink("small", p("link")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mknod(p("cdev"), syscall.S_IFCHR|0o644, 1<<8|3); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(p("fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	populateSubvolumes(t, mnt)
}

// populateSubvolumes makes a two-level subvolume, snapshots it, changes
// both sides and balances, so shared blocks get FULL_BACKREF and shared refs.
func populateSubvolumes(t *testing.T, mnt string) {
	r := testRand(t)
	p := func(name string) string { return filepath.Join(mnt, name) }
	runCmd(t, "btrfs", "subvolume", "create", p("sv"))
	for i := range 300 {
		writeFile(t, p(fmt.Sprintf("sv/f%03d", i)), randBytes(r, 100))
	}
	for i := range 4 {
		writeFile(t, p(fmt.Sprintf("sv/data%d", i)), randBytes(r, 8192))
	}
	syscall.Sync()
	runCmd(t, "btrfs", "subvolume", "snapshot", p("sv"), p("snap"))
	syscall.Sync()
	writeFile(t, p("snap/f000"), []byte("changed in the snapshot"))
	writeFile(t, p("sv/f299"), []byte("changed in the source"))
	if err := os.Remove(p("snap/f150")); err != nil {
		t.Fatal(err)
	}
	// Relocating everything turns shared blocks into FULL_BACKREF blocks
	// and data refs from them into SHARED_DATA_REFs.
	runCmd(t, "btrfs", "balance", "start", "--full-balance", mnt)
	// New reflinks then add keyed-by-inode data refs next to the shared ones.
	runCmd(t, "cp", "--reflink=always", p("zeros"), p("zeros3"))
	runCmd(t, "cp", "--reflink=always", p("zeros"), p("zeros4"))
	runCmd(t, "btrfs", "quota", "enable", mnt)
	runCmd(t, "btrfs", "qgroup", "limit", "10M", p("sv"))
	syscall.Sync()
}
