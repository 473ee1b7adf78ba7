//go:build linux

package main

import (
	"crypto/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// TestMkfsBtrfsReflink runs `mkfs.btrfs --reflink -r ROOT --shrink IMG`
// through the drop-in name with the input and the image on one host
// btrfs: the image file's extents share the input files' blocks
// (FIEMAP), it passes btrfs check with data checksums and the kernel
// shows the input. With the input on another filesystem the host cannot
// clone, and mkfs fails before writing anything, naming the reason, as
// mkfs.btrfs does.
func TestMkfsBtrfsReflink(t *testing.T) {
	btrfstest.RequireInterop(t)
	bin := mkfsBtrfs(t)
	host := btrfstest.Mount(t, "", btrfstest.Mkfs(t, btrfstest.MkfsOptions{Size: 512 << 20}))
	src := filepath.Join(host, "root")
	if out, err := exec.Command("cp", "-a", rootfs(t)+"/.", src).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v\n%s", err, out)
	}
	big := make([]byte, 3<<20+5)
	rand.Read(big)
	if err := os.WriteFile(filepath.Join(src, "usr/lib/big"), big, 0o644); err != nil {
		t.Fatal(err)
	}
	img := filepath.Join(host, "img")
	out, err := exec.Command(bin, "-L", "root", "--reflink", "-r", src, "--shrink", img).CombinedOutput()
	if err != nil {
		t.Fatalf("mkfs.btrfs --reflink: %v\n%s", err, out)
	}
	if strings.Contains(string(out), "reflink") {
		t.Errorf("mkfs.btrfs --reflink warned: %s", out)
	}
	// Every whole block of big lies in a shared extent of the image, at
	// the same place on the host's device.
	var shared []btrfstest.FiemapExtent
	for _, e := range btrfstest.Fiemap(t, img) {
		if e.Shared {
			shared = append(shared, e)
		}
	}
	whole := uint64(len(big)) &^ 4095
	for _, e := range btrfstest.Fiemap(t, filepath.Join(src, "usr/lib/big")) {
		if e.Logical >= whole {
			continue // the partial last block is written
		}
		lo, hi := e.Physical, e.Physical+min(e.Length, whole-e.Logical)
		found := false
		for _, s := range shared {
			found = found || s.Physical <= lo && hi <= s.Physical+s.Length
		}
		if !found {
			t.Errorf("usr/lib/big: extent %v is not shared by the image (shared: %v)", e, shared)
		}
	}
	checkBuilderImage(t, builderCase{label: "root"}, img, src)

	// A directory of the input that is another filesystem (a bind mount
	// of the test's temporary directory): its files cannot be shared,
	// are written, and mkfs says how much.
	mnt := filepath.Join(src, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	elsewhere := t.TempDir()
	if err := os.WriteFile(filepath.Join(elsewhere, "f"), big[:64<<10], 0o644); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount(elsewhere, mnt, "", unix.MS_BIND, ""); err != nil {
		t.Fatalf("bind mount: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(mnt, unix.MNT_DETACH) })
	img3 := filepath.Join(host, "img3")
	out, err = exec.Command(bin, "--reflink", "-r", src, img3).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--reflink: 65536 bytes could not be shared") {
		t.Errorf("mkfs.btrfs --reflink with a mount point in the input: %v\n%s", err, out)
	}
	if err == nil {
		btrfstest.Check(t, []string{img3}, true)
	}

	other := rootfs(t) // on the test's temporary directory, not the host btrfs
	img2 := filepath.Join(host, "img2")
	out, err = exec.Command(bin, "--reflink", "-r", other, img2).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "cannot clone") {
		t.Errorf("mkfs.btrfs --reflink from another filesystem: %v\n%s", err, out)
	}
	if _, err := os.Stat(img2); !os.IsNotExist(err) {
		t.Errorf("the failed mkfs left %s: %v", img2, err)
	}
}
