package cli

import (
	"os"
	"strings"
	"testing"

	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// TestFilesystemLabel reads and sets the label offline: what progs' label
// prints, the new label in the superblock (progs reads it), a label of
// 256 bytes refused with progs' words and nothing changed, and usage
// errors.
func TestFilesystemLabel(t *testing.T) {
	btrfstest.RequireProgs(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{Label: "first"})
	if out := ok(t, "filesystem", "label", img); out != "first\n" {
		t.Errorf("label: %q", out)
	}
	if want := progs(t, "btrfs", "filesystem", "label", img); ok(t, "filesystem", "label", img) != want {
		t.Errorf("label differs from progs' %q", want)
	}
	if out := ok(t, "filesystem", "label", img, "a new label"); out != "" {
		t.Errorf("setting the label printed %q", out)
	}
	if got := progs(t, "btrfs", "filesystem", "label", img); got != "a new label\n" {
		t.Errorf("progs reads the label as %q", got)
	}
	long := strings.Repeat("x", 256)
	_, stderr, code := run(t, "filesystem", "label", img, long)
	if code != ExitFailure || !strings.Contains(stderr, "is too long (max 255)") {
		t.Errorf("256-byte label: exit %d, stderr %q", code, stderr)
	}
	if out := ok(t, "filesystem", "label", img, strings.Repeat("y", 255)); out != "" {
		t.Errorf("255-byte label printed %q", out)
	}
	if out := ok(t, "filesystem", "label", img, ""); out != "" {
		t.Errorf("clearing the label printed %q", out)
	}
	if out := ok(t, "filesystem", "label", img); out != "\n" {
		t.Errorf("cleared label reads %q", out)
	}
	btrfstest.Check(t, []string{img}, false)
	for _, args := range [][]string{{"filesystem", "label"}, {"filesystem", "label", img, "a", "b"}} {
		if _, _, code := run(t, args...); code != ExitUsage {
			t.Errorf("%v: exit %d, want %d", args, code, ExitUsage)
		}
	}
	if _, _, code := run(t, "filesystem", "label", "/nonexistent/image"); code != ExitFailure {
		t.Errorf("label of a missing image: exit %d", code)
	}
}

// TestFilesystemResize grows an image file by +SIZE (the file grows with
// it), keeps it with max, shrinks it by -SIZE and to SIZE (the file is
// cut), each printing progs' line and leaving btrfs check clean; sizes
// and device ids that cannot be, and usage errors, have their exit codes.
func TestFilesystemResize(t *testing.T) {
	btrfstest.RequireProgs(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{Size: 256 << 20})
	path := canonicalPath(img)
	fileSize := func() int64 {
		fi, err := os.Stat(img)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	for _, c := range []struct {
		arg, from, to string
		file          int64
	}{
		{"+64M", "256.00MiB", "320.00MiB", 320 << 20},
		{"max", "320.00MiB", "320.00MiB", 320 << 20},
		{"1:-32m", "320.00MiB", "288.00MiB", 288 << 20},
		{"1G", "288.00MiB", "1.00GiB", 1 << 30},
		{"200M", "1.00GiB", "200.00MiB", 200 << 20},
	} {
		out := ok(t, "filesystem", "resize", c.arg, img)
		if want := "Resize device id 1 (" + path + ") from " + c.from + " to " + c.to + "\n"; out != want {
			t.Errorf("resize %s: %q, want %q", c.arg, out, want)
		}
		if got := fileSize(); got != c.file {
			t.Errorf("resize %s: image file of %d bytes, want %d", c.arg, got, c.file)
		}
		btrfstest.Check(t, []string{img}, false)
	}
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"1x", img}, ExitUsage, "failed to parse size 1x"},
		{[]string{"x:1G", img}, ExitUsage, "invalid devid: x"},
		{[]string{"max"}, ExitUsage, ""},
		{[]string{"--nosuch", "max", img}, ExitUsage, "unknown flag"},
		{[]string{"2:max", img}, ExitFailure, "invalid device id 2"},
		{[]string{"-1G", img}, ExitFailure, "Invalid argument"},
		{[]string{"4M", img}, ExitFailure, "No space left on device"},
		{[]string{"max", "/nonexistent/image"}, ExitFailure, ""},
	} {
		_, stderr, code := run(t, append([]string{"filesystem", "resize"}, c.args...)...)
		if code != c.code || !strings.Contains(stderr, c.msg) {
			t.Errorf("resize %v: exit %d, stderr %q; want exit %d with %q", c.args, code, stderr, c.code, c.msg)
		}
	}
	if got := fileSize(); got != 200<<20 {
		t.Errorf("refused resizes left an image file of %d bytes", got)
	}
	btrfstest.Check(t, []string{img}, false)
	out, _, code := run(t, "filesystem", "resize", "--help")
	if code != ExitOK || !strings.Contains(out, "Usage:") || !strings.Contains(out, "max") {
		t.Errorf("resize --help: exit %d, %q", code, out)
	}
}

// TestFilesystemResizeBlockDevice grows a filesystem on a loop device to
// the device's size with max (the file behind it was extended first), and
// refuses to grow past the device; the kernel then mounts it at the new
// size and btrfs check is clean.
func TestFilesystemResizeBlockDevice(t *testing.T) {
	btrfstest.RequireInterop(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{Size: 128 << 20})
	if err := os.Truncate(img, 200<<20); err != nil {
		t.Fatal(err)
	}
	dev := btrfstest.Attach(t, img)
	want := "Resize device id 1 (" + dev + ") from 128.00MiB to 200.00MiB\n"
	if out := ok(t, "filesystem", "resize", "max", dev); out != want {
		t.Errorf("resize max on %s: %q, want %q", dev, out, want)
	}
	_, stderr, code := run(t, "filesystem", "resize", "+1M", dev)
	if code != ExitFailure || !strings.Contains(stderr, "File too large") {
		t.Errorf("growing past the block device: exit %d, %q", code, stderr)
	}
	btrfstest.Check(t, []string{dev}, false)
	if out := ok(t, "filesystem", "show", "--raw", dev); !strings.Contains(out, "size 209715200 ") {
		t.Errorf("after resize max: %s", out)
	}
	dir := btrfstest.Mount(t, "", dev)
	if err := os.WriteFile(dir+"/after", []byte("written by the kernel\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	btrfstest.Unmount(t, dir)
	btrfstest.Check(t, []string{dev}, true)
}

// TestFilesystemResizeMultiDevice shrinks and grows device 2 of a RAID1
// pair named with --device, as `btrfs filesystem resize 2:-SIZE` does on
// a mount: the line names device 2 and its file, which is cut to the new
// size; a shrink that cannot fit names the device and the bytes missing.
func TestFilesystemResizeMultiDevice(t *testing.T) {
	btrfstest.RequireInterop(t)
	devs := btrfstest.MkfsMulti(t, btrfstest.MkfsOptions{Size: 256 << 20, DataProfile: "raid1", MetadataProfile: "raid1"})
	path := canonicalPath(devs[1])
	for _, c := range []struct {
		arg, from, to string
		file          int64
	}{
		{"2:-64M", "256.00MiB", "192.00MiB", 192 << 20},
		{"2:+32M", "192.00MiB", "224.00MiB", 224 << 20},
	} {
		out := ok(t, "filesystem", "resize", "--device", devs[1], c.arg, devs[0])
		if want := "Resize device id 2 (" + path + ") from " + c.from + " to " + c.to + "\n"; out != want {
			t.Errorf("resize %s: %q, want %q", c.arg, out, want)
		}
		if fi, err := os.Stat(devs[1]); err != nil || fi.Size() != c.file {
			t.Errorf("resize %s: device 2's file: %v, want %d bytes", c.arg, err, c.file)
		}
		btrfstest.Check(t, devs, false)
	}
	_, stderr, code := run(t, "filesystem", "resize", "--device", devs[1], "2:4M", devs[0])
	if code != ExitFailure || !strings.Contains(stderr, "No space left on device") || !strings.Contains(stderr, "device 2") {
		t.Errorf("shrinking device 2 to 4 MiB: exit %d, %q", code, stderr)
	}
	btrfstest.Check(t, devs, false)
}
