package cli

import (
	"strings"
	"testing"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// TestCmdRefusesLockedImage: while a writer has the image open, editing
// commands and mkfs exit 1 saying the image is open for writing
// elsewhere, and change nothing; reading commands work. After the writer
// closes, the edit goes through.
func TestCmdRefusesLockedImage(t *testing.T) {
	img := btrfstest.OpenFixture(t, "rootdir-16k-crc32c")
	w, err := btrfs.OpenWritable(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })

	for _, args := range [][]string{
		{"mkdir", img + ":/new"},
		{"edit", img, "-f", "-"},
		{"mkfs", "--force", img},
	} {
		out, stderr, code := run(t, args...)
		if code != ExitFailure || !strings.Contains(stderr, img+": image is open for writing elsewhere") {
			t.Errorf("%q while another writer is open: exit %d\n%s%s", args, code, out, stderr)
		}
	}
	if out := mustRun(t, ExitOK, "ls", img); strings.Contains(out, "new") || !strings.Contains(out, "regular") {
		t.Errorf("ls while a writer is open:\n%s", out)
	}

	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	mustRun(t, ExitOK, "mkdir", img+":/new")
	if out := mustRun(t, ExitOK, "ls", img); !strings.Contains(out, "new") {
		t.Errorf("mkdir after the writer closed did not take:\n%s", out)
	}
}

// TestCmdRefusesMountedImage: an image the kernel has mounted is refused
// by editing commands with a message naming the mount point; ls works;
// after the unmount the edit goes through.
func TestCmdRefusesMountedImage(t *testing.T) {
	btrfstest.RequireInterop(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{})
	dir := btrfstest.Mount(t, "", img)
	out, stderr, code := run(t, "mkdir", img+":/new")
	if code != ExitFailure || !strings.Contains(stderr, img+": mounted by the kernel at "+dir+" (through /dev/loop") ||
		!strings.Contains(stderr, "unmount it first") {
		t.Errorf("mkdir on a mounted image: exit %d\n%s%s", code, out, stderr)
	}
	mustRun(t, ExitOK, "ls", img)
	btrfstest.Unmount(t, dir)
	mustRun(t, ExitOK, "mkdir", img+":/new")
	if out := mustRun(t, ExitOK, "ls", img); !strings.Contains(out, "new") {
		t.Errorf("mkdir after the unmount did not take:\n%s", out)
	}
}
