package cli

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
	"github.com/gobtrfs/btrfs/internal/fsview"
)

// runIn is run with standard input.
func runIn(t *testing.T, stdin []byte, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var o, e bytes.Buffer
	code = Main(args, bytes.NewReader(stdin), &o, &e)
	return o.String(), e.String(), code
}

func mkfsTar(t *testing.T) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	mt := time.Unix(1700000000, 5)
	for _, h := range []*tar.Header{
		{Name: "etc/hosts", Typeflag: tar.TypeReg, Mode: 0o644, Uid: 1000, Gid: 1000, Size: 10, ModTime: mt, Format: tar.FormatPAX},
		{Name: "dev/null", Typeflag: tar.TypeChar, Mode: 0o666, Devmajor: 1, Devminor: 3, ModTime: mt, Format: tar.FormatPAX},
	} {
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Size > 0 {
			tw.Write([]byte("127.0.0.1\n"))
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestMkfsUsage(t *testing.T) {
	dir := t.TempDir()
	img := filepath.Join(dir, "img")
	for _, args := range [][]string{
		{"mkfs"},
		{"mkfs", "--tar", "-", img},    // does not exist, no --size, input not measurable
		{"mkfs", "--size", "12Q", img}, // bad size
		{"mkfs", "--size", "256M", "--csum", "md5", img},
		{"mkfs", "--size", "256M", "--chown", "root", img},
		{"mkfs", "--size", "256M", "--chmod", "u+q", img},
		{"mkfs", "--size", "256M", "--uuid", "nope", img},
		{"mkfs", "--size", "256M", "--rootdir", dir, "--tar", "-", img},
		{"mkfs", "--size", "256M", "--compress", "zstd:x", img},
		{"mkfs", "--size", "256M", "--compress", "zstd", img}, // needs an input, as in mkfs.btrfs
		{"mkfs", "--size", "256M", "--subvol", "home", img},
		{"mkfs", "--size", "256M", "--shrink", img},
		{"mkfs", "--size", "256M", "--reflink", img},
		{"mkfs", "--size", "256M", "--rootdir", dir, "--inode-flags", "nodatacow", img},
		{"mkfs", "--size", "256M", "--rootdir", dir, "--inode-flags", "immutable:x", img},
		{"mkfs", "--size", "256M", "--device-uuid", "x", img},
		{"mkfs", img, img + "2"}, // one device only
	} {
		if _, stderr, code := run(t, args...); code != ExitUsage || strings.Contains(stderr, "unknown command") {
			t.Errorf("%q: exit %d, want %d (%s)", args, code, ExitUsage, stderr)
		}
	}
	t.Setenv("SOURCE_DATE_EPOCH", "yesterday")
	if _, _, code := run(t, "mkfs", "--size", "256M", img); code != ExitUsage {
		t.Errorf("bad SOURCE_DATE_EPOCH: exit %d", code)
	}
}

func TestMkfsFailures(t *testing.T) {
	dir := t.TempDir()
	img := filepath.Join(dir, "img")
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--rootdir", t.TempDir(), "--subvol", "home"}, "no such directory"},
		{[]string{"--rootdir", t.TempDir(), "--inode-flags", "nodatacow:nothere"}, "nothere"},
		{[]string{"-M", "-n", "16384"}, "mixed"},
		{[]string{"-O", "quota"}, "quota"},
		{[]string{"-m", "raid1"}, "raid1"},
		{[]string{"--rootdir", filepath.Join(dir, "missing")}, "missing"},
		{[]string{"--tar", filepath.Join(dir, "missing.tar")}, "missing.tar"},
	} {
		args := append([]string{"mkfs", "--size", "256M"}, c.args...)
		img := filepath.Join(t.TempDir(), "img")
		_, stderr, code := run(t, append(args, img)...)
		if code != ExitFailure || !strings.Contains(stderr, c.msg) {
			t.Errorf("%q: exit %d, stderr %q; want %d naming %q", c.args, code, stderr, ExitFailure, c.msg)
		}
	}
	// A name that cannot be stored is named, and nothing is written.
	long := strings.Repeat("x", 256)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Name: "d/" + long, Typeflag: tar.TypeReg, Format: tar.FormatPAX})
	tw.Close()
	tarPath := filepath.Join(dir, "long.tar")
	if err := os.WriteFile(tarPath, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	img = filepath.Join(dir, "img2")
	_, stderr, code := run(t, "mkfs", "--size", "256M", "--tar", tarPath, img)
	if code != ExitFailure || !strings.Contains(stderr, "d/"+long) {
		t.Errorf("long name: exit %d, stderr %q", code, stderr)
	}
	if _, err := os.Stat(img); !os.IsNotExist(err) {
		t.Errorf("image written before the error: %v", err)
	}
}

func TestMkfsEmptyAndForce(t *testing.T) {
	img := filepath.Join(t.TempDir(), "img")
	_, stderr, code := run(t, "mkfs", "--size", "256M", "-L", "lbl", "--csum", "xxhash", "-n", "4k", img)
	if code != ExitOK {
		t.Fatalf("mkfs: exit %d: %s", code, stderr)
	}
	fsys, err := btrfs.Open(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	sb := fsview.Of(fsys).Superblock()
	fsys.Close()
	if sb.NodeSize != 4096 || sb.CsumType != 1 || !strings.HasPrefix(string(sb.Label[:]), "lbl\x00") {
		t.Errorf("superblock: nodesize %d csum %d label %q", sb.NodeSize, sb.CsumType, sb.Label[:8])
	}
	if _, stderr, code := run(t, "mkfs", img); code != ExitFailure || !strings.Contains(stderr, "--force") {
		t.Errorf("mkfs over a filesystem: exit %d, stderr %q", code, stderr)
	}
	if _, stderr, code := run(t, "mkfs", "-f", "-q", img); code != ExitOK {
		t.Errorf("mkfs -f: exit %d, stderr %q", code, stderr)
	}
	if btrfstest.Interop() {
		btrfstest.Check(t, []string{img}, true)
	}
}

func TestMkfsRootdir(t *testing.T) {
	btrfstest.RequireInterop(t)
	src := t.TempDir()
	os.MkdirAll(filepath.Join(src, "a/b"), 0o755)
	os.WriteFile(filepath.Join(src, "a/b/f"), []byte("data"), 0o640)
	os.Symlink("b/f", filepath.Join(src, "a/s"))
	want, err := btrfstest.Scan(src)
	if err != nil {
		t.Fatal(err)
	}
	img := filepath.Join(t.TempDir(), "img")
	_, stderr, code := run(t, "mkfs", "--size", "256M", "--rootdir", src, img)
	if code != ExitOK || stderr != "" {
		t.Fatalf("exit %d, stderr %q (no progress display without a terminal)", code, stderr)
	}
	btrfstest.Check(t, []string{img}, true)
	got, err := btrfstest.Scan(btrfstest.Mount(t, "ro", img))
	if err != nil {
		t.Fatal(err)
	}
	if d := btrfstest.Diff(want, got, btrfstest.DiffOptions{}); len(d) > 0 {
		t.Errorf("%s", strings.Join(d, "\n"))
	}
}

func TestMkfsTarStdinReproducible(t *testing.T) {
	b := mkfsTar(t)
	t.Setenv("SOURCE_DATE_EPOCH", "1690000000")
	dir := t.TempDir()
	var imgs [2][]byte
	for i := range imgs {
		img := filepath.Join(dir, "img"+string(rune('0'+i)))
		_, stderr, code := runIn(t, b, "mkfs", "--size", "256M", "--tar", "-", "--chown", "5:6", img)
		if code != ExitOK {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		var err error
		if imgs[i], err = os.ReadFile(img); err != nil {
			t.Fatal(err)
		}
		if i == 0 && btrfstest.Interop() {
			btrfstest.Check(t, []string{img}, true)
			mnt := btrfstest.Mount(t, "ro", img)
			got, err := btrfstest.Scan(mnt)
			if err != nil {
				t.Fatal(err)
			}
			e := got.Entries["dev/null"]
			if e == nil || e.Type != btrfstest.TypeCharDev || e.RdevMajor != 1 || e.RdevMinor != 3 || e.UID != 5 || e.GID != 6 {
				t.Errorf("dev/null: %+v", e)
			}
			if e := got.Entries["etc/hosts"]; e == nil || e.MtimeNs != 1690000000e9 || e.UID != 5 {
				t.Errorf("etc/hosts (mtime clamped to the epoch, owner 5:6): %+v", e)
			}
			btrfstest.Unmount(t, mnt)
		}
	}
	if !bytes.Equal(imgs[0], imgs[1]) {
		t.Error("two runs with SOURCE_DATE_EPOCH gave different images")
	}
}

func TestMkfsTarFile(t *testing.T) {
	btrfstest.RequireInterop(t)
	dir := t.TempDir()
	tarPath, img := filepath.Join(dir, "in.tar"), filepath.Join(dir, "img")
	if err := os.WriteFile(tarPath, mkfsTar(t), 0o644); err != nil {
		t.Fatal(err)
	}
	_, stderr, code := run(t, "mkfs", "--size", "300M", "--tar", tarPath, "--chmod", "Fa-w", "--compress", "zstd:3",
		"-d", "dup", "-m", "single", "--csum", "blake2", "-O", "^free-space-tree", img)
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	btrfstest.Check(t, []string{img}, true)
	got, err := btrfstest.Scan(btrfstest.Mount(t, "ro", img))
	if err != nil {
		t.Fatal(err)
	}
	e := got.Entries["etc/hosts"]
	if e == nil || e.Perm != 0o444 || e.UID != 1000 || e.MtimeNs != 1700000000e9+5 || e.Size != 10 {
		t.Errorf("etc/hosts: %+v", e)
	}
	if d := got.Entries["etc"]; d == nil || d.Type != btrfstest.TypeDir || d.Perm != 0o755 {
		t.Errorf("implied directory etc: %+v", d)
	}
	// Standard input, read once (no pre-pass).
	img2 := filepath.Join(dir, "img2")
	if _, stderr, code := runIn(t, mkfsTar(t), "mkfs", "-b", "256M", "--tar", "-", img2); code != ExitOK {
		t.Fatalf("--tar -: exit %d: %s", code, stderr)
	}
	btrfstest.Check(t, []string{img2}, true)
}

// TestMkfsSizedFromInput makes a new image without --size: it is sized
// from the --rootdir input, in whole MiB, and holds it.
func TestMkfsSizedFromInput(t *testing.T) {
	btrfstest.RequireInterop(t)
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "f"), bytes.Repeat([]byte("x"), 3<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	img := filepath.Join(t.TempDir(), "img")
	if _, stderr, code := run(t, "mkfs", "--rootdir", src, img); code != ExitOK {
		t.Fatalf("mkfs: exit %d: %s", code, stderr)
	}
	fi, err := os.Stat(img)
	if err != nil || fi.Size()%(1<<20) != 0 || fi.Size() < 256<<20 {
		t.Fatalf("image %v: %v", fi, err)
	}
	btrfstest.Check(t, []string{img}, true)
	if out, _, code := run(t, "cat", img+":/f"); code != ExitOK || len(out) != 3<<20 {
		t.Errorf("cat: exit %d, %d bytes", code, len(out))
	}
}

// TestMkfsBlockGroupTreeDefault: the block-group tree is on by default, as
// in mkfs.btrfs 6.19, and turning off what it needs turns it off with
// 6.19's warning.
func TestMkfsBlockGroupTreeDefault(t *testing.T) {
	for _, c := range []struct {
		args []string
		bgt  bool
		warn bool
	}{
		{nil, true, false},
		{[]string{"-O", "^block-group-tree"}, false, false},
		{[]string{"-O", "^free-space-tree"}, false, true},
		{[]string{"-R", "^free-space-tree", "-O", "block_group_tree"}, false, true},
	} {
		img := filepath.Join(t.TempDir(), "img")
		_, stderr, code := run(t, append(append([]string{"mkfs", "-q", "--size", "256M"}, c.args...), img)...)
		if code != ExitOK {
			t.Fatalf("%q: exit %d: %s", c.args, code, stderr)
		}
		if got := strings.Contains(stderr, "WARNING: disabling block-group-tree feature due to missing no-holes and free-space-tree features"); got != c.warn {
			t.Errorf("%q: stderr %q, want the warning: %v", c.args, stderr, c.warn)
		}
		out, _, code := run(t, "info", img)
		if code != ExitOK || strings.Contains(out, "BLOCK_GROUP_TREE") != c.bgt {
			t.Errorf("%q: info (exit %d) says\n%s\nwant BLOCK_GROUP_TREE: %v", c.args, code, out, c.bgt)
		}
	}
}
