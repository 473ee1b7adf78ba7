package cli

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
	"github.com/gobtrfs/btrfs/internal/disk"
	"github.com/gobtrfs/btrfs/internal/fsview"
)

// Errors in the user's words: what an image is when it is not btrfs, a
// damaged file rather than a "tree block", a full image, and what is not
// supported yet.

func TestNotBtrfsSaysWhatItIs(t *testing.T) {
	dir := t.TempDir()
	mk := func(name string, size int64, at int64, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(p, size); err != nil {
			t.Fatal(err)
		}
		f, _ := os.OpenFile(p, os.O_WRONLY, 0)
		f.WriteAt(b, at)
		f.Close()
		return p
	}
	ext2 := mk("ext2.img", 4<<20, 1024+0x38, binary.LittleEndian.AppendUint16(nil, 0xEF53))
	cases := map[string]string{
		ext2: "ext2 filesystem, not btrfs",
		mk("swap.img", 4<<20, 4086, []byte("SWAPSPACE2")):          "swap space, not btrfs",
		mk("luks.img", 4<<20, 0, []byte("LUKS\xba\xbe")):           "LUKS encrypted volume, not btrfs",
		mk("zeros.img", 4<<20, 0, nil):                             "no filesystem (only zeros where it would start)",
		mk("tiny.img", 100, 0, []byte("x")):                        "too small to hold a btrfs filesystem",
		mk("text.img", 4<<20, 0, bytes.Repeat([]byte("x"), 1<<17)): "not a btrfs filesystem",
	}
	if _, err := exec.LookPath("mkfs.ext4"); err == nil {
		p := mk("ext4.img", 32<<20, 0, nil)
		if out, err := exec.Command("mkfs.ext4", "-q", "-F", p).CombinedOutput(); err != nil {
			t.Fatalf("mkfs.ext4: %v\n%s", err, out)
		}
		cases[p] = "ext4 filesystem, not btrfs"
	}
	for img, want := range cases {
		for _, args := range [][]string{{"ls", img}, {"mkdir", img + ":/d"}} {
			_, stderr, code := run(t, args...)
			if code != ExitFailure || !strings.HasPrefix(stderr, "gobtrfs "+args[0]+": "+img+": "+want) ||
				strings.Contains(stderr, "corrupt") || strings.Count(stderr, img) != 1 {
				t.Errorf("%s: exit %d, stderr %q, want %q", args, code, stderr, want)
			}
		}
	}
}

func TestDamagedDataIsNotATreeBlock(t *testing.T) {
	img := btrfstest.OpenFixture(t, "rootdir-16k-crc32c")
	fsys, err := btrfs.Open(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	info, err := fsys.Info()
	if err != nil {
		t.Fatal(err)
	}
	m := fsview.Of(fsys).ChunkMap()
	f, err := os.OpenFile(img, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, bg := range info.BlockGroups {
		if bg.Type != "DATA" || bg.Used == 0 {
			continue
		}
		for l := bg.Start; l < bg.Start+bg.Length; l += 4096 {
			mp, err := m.Mirrors(disk.LogicalAddr(l), 1)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range mp.Copies {
				b := []byte{0}
				f.ReadAt(b, int64(c.Physical)+9)
				b[0] ^= 0xff
				f.WriteAt(b, int64(c.Physical)+9)
			}
		}
	}
	f.Close()
	fsys.Close()
	_, stderr, code := run(t, "cat", img+":/regular")
	if code != ExitFailure || !strings.HasPrefix(stderr, "gobtrfs cat: "+img+":/regular: damaged file data: checksum mismatch") ||
		strings.Contains(stderr, "tree") || strings.Count(stderr, "\n") != 1 {
		t.Errorf("cat of a damaged file: exit %d, stderr %q", code, stderr)
	}
}

func TestNoSpaceInUserWords(t *testing.T) {
	img := filepath.Join(t.TempDir(), "small.img")
	mustRun(t, ExitOK, "mkfs", "-q", "-b", "128M", img)
	// Metadata runs out first: long names in one directory.
	var script strings.Builder
	for i := range 60000 {
		fmt.Fprintf(&script, "mkdir /d%07d_%s\n", i, strings.Repeat("x", 200))
	}
	_, stderr, code := runEdit(t, img, script.String())
	if code != ExitFailure || !strings.HasSuffix(stderr, ": No space left on device\n") {
		t.Fatalf("edit past the end of space: exit %d, stderr %q", code, stderr)
	}
	for _, internal := range []string{"alloc", "block group", "tree", "chunk"} {
		if strings.Contains(stderr, internal) {
			t.Errorf("ENOSPC message names %q: %q", internal, stderr)
		}
	}
	// File data too.
	big := filepath.Join(t.TempDir(), "big")
	os.WriteFile(big, bytes.Repeat([]byte{1, 2, 3}, 70<<20), 0o644)
	_, stderr, code = run(t, "cp", big, img+":/big")
	if want := "gobtrfs cp: " + img + ":/big: No space left on device\n"; code != ExitFailure || stderr != want {
		t.Errorf("cp of too much: exit %d, stderr %q, want %q", code, stderr, want)
	}
}

func TestCpWithinImageReflinks(t *testing.T) {
	img := editImage(t)
	at := func(p string) string { return img + ":" + p }
	host := filepath.Join(t.TempDir(), "data")
	data := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	os.WriteFile(host, data, 0o640)
	mustRun(t, ExitOK, "mkdir", "-p", at("d/sub"))
	mustRun(t, ExitOK, "cp", host, at("d/sub/f"))
	mustRun(t, ExitOK, "ln", "-s", "sub/f", at("d/link"))
	used := func() uint64 {
		fsys, err := btrfs.Open(img, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer fsys.Close()
		info, err := fsys.Info()
		if err != nil {
			t.Fatal(err)
		}
		var n uint64
		for _, bg := range info.BlockGroups {
			if bg.Type == "DATA" {
				n += bg.Used
			}
		}
		return n
	}
	before := used()
	mustRun(t, ExitOK, "cp", at("d/sub/f"), at("copy"))
	mustRun(t, ExitOK, "cp", "-a", at("d"), at("tree"))
	mustRun(t, ExitFailure, "cp", at("d"), at("nodir")) // a directory needs -r
	if after := used(); after != before {
		t.Errorf("data used %d -> %d: the copies did not share extents", before, after)
	}
	for _, p := range []string{"copy", "tree/sub/f"} {
		if got := catImage(t, img, p); got != string(data) {
			t.Errorf("%s: %d bytes, want the 1 MiB copied", p, len(got))
		}
	}
	if got := readImageLink(t, img, "tree/link"); got != "sub/f" {
		t.Errorf("tree/link -> %q", got)
	}
	if st := statOf(t, img, "tree/sub/f"); st.Mode&0o7777 != 0o640 {
		t.Errorf("cp -a inside the image: mode %o, want 640", st.Mode&0o7777)
	}
	_, stderr, code := run(t, "cp", "-r", at("d"), at("d/sub"))
	if code != ExitFailure || !strings.Contains(stderr, "cannot copy a file or directory into itself") {
		t.Errorf("cp -r d d/sub: exit %d, %q", code, stderr)
	}
	btrfstest.Check(t, []string{img}, true)
}

func TestCpIntoMissingDirectory(t *testing.T) {
	img := editImage(t)
	host := filepath.Join(t.TempDir(), "f")
	os.WriteFile(host, []byte("x"), 0o644)
	_, stderr, code := run(t, "cp", host, img+":/nodir/f")
	if want := "gobtrfs cp: " + img + ":/nodir/f: No such file or directory\n"; code != ExitFailure || stderr != want {
		t.Errorf("cp into a missing directory: exit %d, stderr %q, want %q", code, stderr, want)
	}
}

// TestSubvolumeRemoveAndMove: rm, rmdir and mv take subvolumes as
// coreutils does on a kernel mount (checked on Linux 6.18): mv moves
// one anywhere in the image, rmdir deletes an empty one and refuses one
// with entries, rm needs -r, rm -r empties and deletes (nested ones
// first), a read-only one with entries cannot be emptied, and the
// default subvolume is not deleted.
func TestSubvolumeRemoveAndMove(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "top", "home", "u"), 0o755)
	os.WriteFile(filepath.Join(root, "top", "home", "u", "f"), []byte("data"), 0o644)
	img := filepath.Join(t.TempDir(), "sv.img")
	mustRun(t, ExitOK, "mkfs", "-q", "--rootdir", root, "--subvol", "top/home", img)
	at := func(p string) string { return img + ":" + p }
	mustRun(t, ExitOK, "subvolume", "create", at("/top/home/nested"))
	mustRun(t, ExitOK, "subvolume", "create", at("/empty"))
	mustRun(t, ExitOK, "subvolume", "create", at("/def"))
	mustRun(t, ExitOK, "subvolume", "set-default", at("/def"))
	mustRun(t, ExitOK, "subvolume", "snapshot", "-r", at("/top/home"), at("/ro"))
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"rmdir", at("top/home")}, img + ":/top/home: Directory not empty"},
		{[]string{"rm", at("top/home")}, img + ":/top/home: Is a directory"},
		{[]string{"rm", "-r", at("ro")}, ": Read-only file system"},
		{[]string{"rmdir", at("def")}, img + ":/def: Operation not permitted"},
	} {
		_, stderr, code := run(t, c.args...)
		if code != ExitFailure || !strings.Contains(stderr, c.want) {
			t.Errorf("%q: exit %d, stderr %q, want %q", c.args, code, stderr, c.want)
		}
	}
	statOf(t, img, "top/home/u/f") // nothing went
	statOf(t, img, "ro/u/f")
	mustRun(t, ExitOK, "mv", at("top/home"), at("h"))
	if got := catImage(t, img, "h/u/f"); got != "data" {
		t.Errorf("h/u/f after mv: %q", got)
	}
	mustRun(t, ExitOK, "rmdir", at("empty"))
	mustRun(t, ExitOK, "rm", "-rf", at("h"))
	mustRun(t, ExitOK, "mv", at("ro"), at("top/ro"))
	for _, p := range []string{"h", "empty", "ro"} {
		if _, stderr, code := run(t, "ls", at(p)); code == ExitOK {
			t.Errorf("%s still there: %q", p, stderr)
		}
	}
	statOf(t, img, "top/ro/u/f")
	btrfstest.Check(t, []string{img}, true)
}

func TestCpFromProcCopiesContents(t *testing.T) {
	want, err := os.ReadFile("/proc/version")
	if err != nil || len(want) == 0 {
		t.Skip("no /proc/version")
	}
	img := editImage(t)
	mustRun(t, ExitOK, "cp", "/proc/version", img+":/version")
	if got := catImage(t, img, "version"); got != string(want) {
		t.Errorf("cp /proc/version: %q, want %q", got, want)
	}
}

func TestExtractNeverSucceedsEmptyAndOverwrites(t *testing.T) {
	img := editImage(t)
	mustRun(t, ExitOK, "write", img+":/f", "one")
	dir := t.TempDir()
	notDir := filepath.Join(dir, "file")
	os.WriteFile(notDir, nil, 0o644)
	_, stderr, code := run(t, "extract", "-q", img+":/f", notDir)
	if code != ExitFailure || !strings.Contains(stderr, notDir+": Not a directory") {
		t.Errorf("extract into a file: exit %d, stderr %q", code, stderr)
	}
	out := filepath.Join(dir, "out")
	mustRun(t, ExitOK, "extract", "-q", img+":/f", out)
	mustRun(t, ExitOK, "write", img+":/f", "two")
	_, stderr, code = run(t, "extract", "-q", img, out)
	want := "gobtrfs extract: " + filepath.Join(out, "f") + ": File exists (--overwrite replaces it)\n"
	if code != ExitFailure || stderr != want {
		t.Errorf("extract over an existing file: exit %d, stderr %q, want %q", code, stderr, want)
	}
	mustRun(t, ExitOK, "extract", "-q", "--overwrite", img, out)
	if b, _ := os.ReadFile(filepath.Join(out, "f")); string(b) != "two" {
		t.Errorf("extract --overwrite: %q, want two", b)
	}
}
