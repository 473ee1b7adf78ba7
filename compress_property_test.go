package btrfs_test

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"testing"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
	"github.com/gobtrfs/btrfs/internal/disk"
)

// compressible is data every algorithm shrinks.
var compressible = bytes.Repeat([]byte("the compression property decides "), 8192)

// TestCompressionProperty sets btrfs.compression as `btrfs property set`
// does and writes files: the property is checked as the kernel checks
// it, mirrored into the COMPRESS/NOCOMPRESS flags, inherited by new
// files and directories, and its algorithm beats the filesystem's
// (Options.Compress, the compress= mount option); "no" turns compression
// off. btrfs check passes; the kernel reads the property we set, writes
// files inheriting it, and we honour a property it set.
func TestCompressionProperty(t *testing.T) {
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{})
	fsys, err := btrfs.OpenWritable(img, &btrfs.Options{Compress: "zlib"})
	if err != nil {
		t.Fatal(err)
	}
	const prop = btrfs.PropCompression
	mustOK(t, fsys.Mkdir("z", 0o755))
	mustOK(t, fsys.Mkdir("n", 0o755))
	mustOK(t, fsys.Setxattr("z", prop, []byte("zstd")))
	mustOK(t, fsys.Setxattr("n", prop, []byte("no")))
	mustOK(t, fsys.Symlink("z", "link"))
	wantErrno(t, "bad algorithm", fsys.Setxattr("z", prop, []byte("brotli")), syscall.EINVAL)
	wantErrno(t, "other btrfs. name", fsys.Setxattr("z", "btrfs.other", []byte("x")), syscall.EINVAL)
	wantErrno(t, "on a symlink", fsys.Setxattr("link", prop, []byte("zstd")), syscall.EINVAL)
	mustOK(t, fsys.Mkdir("z/sub", 0o755))
	for _, p := range []string{"z/f", "z/sub/f", "n/f", "plain"} {
		mustOK(t, fsys.WriteFile(p, compressible, 0o644))
	}
	flags := func(p string) disk.InodeFlags { return disk.InodeFlags(statOf(t, fsys, p).Flags) }
	for p, want := range map[string]disk.InodeFlags{
		"z": disk.InodeCompress, "z/sub": disk.InodeCompress, "z/f": disk.InodeCompress, "z/sub/f": disk.InodeCompress,
		"n": disk.InodeNoCompress, "n/f": disk.InodeNoCompress, "plain": 0,
	} {
		if got := flags(p) & (disk.InodeCompress | disk.InodeNoCompress); got != want {
			t.Errorf("%s: flags %v, want %v", p, got, want)
		}
	}
	for p, want := range map[string]string{"z/sub": "zstd", "z/sub/f": "zstd", "n/f": "no"} {
		if v, err := fsys.Getxattr(p, prop); err != nil || string(v) != want {
			t.Errorf("%s: inherited property %q, %v; want %q", p, v, err, want)
		}
	}
	mustOK(t, fsys.Mkdir("gone", 0o755))
	mustOK(t, fsys.Setxattr("gone", prop, []byte("lzo")))
	mustOK(t, fsys.Removexattr("gone", prop))
	if f := flags("gone"); f&(disk.InodeCompress|disk.InodeNoCompress) != 0 {
		t.Errorf("removed property left flags %v", f)
	}
	ino := func(p string) uint64 { return statOf(t, fsys, p).Ino }
	want := map[uint64]string{ino("z/f"): "zstd", ino("z/sub/f"): "zstd", ino("n/f"): "none", ino("plain"): "zlib"}
	mustOK(t, fsys.Close())
	btrfstest.Check(t, []string{img}, true)
	checkCompression(t, img, want)

	if !btrfstest.Interop() && os.Getenv(btrfstest.InteropEnv) != "1" {
		return
	}
	mnt := btrfstest.Mount(t, "", img)
	out, err := exec.Command("btrfs", "property", "get", filepath.Join(mnt, "z/f"), "compression").CombinedOutput()
	if err != nil || string(bytes.TrimSpace(out)) != "compression=zstd" {
		t.Errorf("kernel's property of z/f: %q, %v", out, err)
	}
	if err := os.WriteFile(filepath.Join(mnt, "z/kernel"), compressible, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(mnt, "k"), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("btrfs", "property", "set", filepath.Join(mnt, "k"), "compression", "lzo").CombinedOutput(); err != nil {
		t.Fatalf("property set: %v\n%s", err, out)
	}
	btrfstest.Unmount(t, mnt)
	fsys, err = btrfs.OpenWritable(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	mustOK(t, fsys.WriteFile("k/ours", compressible, 0o644))
	want = map[uint64]string{ino("z/kernel"): "zstd", ino("k/ours"): "lzo"}
	mustOK(t, fsys.Close())
	btrfstest.Check(t, []string{img}, true)
	checkCompression(t, img, want)
}

var (
	dumpItemRe = regexp.MustCompile(`^\s+item \d+ key \((\d+) EXTENT_DATA \d+\)`)
	dumpCompRe = regexp.MustCompile(`\bcompression (\d+)`)
)

// checkCompression reads dump-tree of the top subvolume and checks that
// every data extent of each inode in want has the named compression.
func checkCompression(t *testing.T, img string, want map[uint64]string) {
	t.Helper()
	btrfstest.RequireProgs(t)
	out, err := exec.Command("btrfs", "inspect-internal", "dump-tree", "-t", "5", img).CombinedOutput()
	if err != nil {
		t.Fatalf("dump-tree: %v\n%s", err, out)
	}
	names := []string{"none", "zlib", "lzo", "zstd"}
	got := map[uint64]map[string]bool{}
	var cur uint64
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if m := dumpItemRe.FindStringSubmatch(sc.Text()); m != nil {
			cur, _ = strconv.ParseUint(m[1], 10, 64)
			continue
		}
		if m := dumpCompRe.FindStringSubmatch(sc.Text()); m != nil && cur != 0 {
			n, _ := strconv.Atoi(m[1])
			if got[cur] == nil {
				got[cur] = map[string]bool{}
			}
			if n < len(names) {
				got[cur][names[n]] = true
			}
			cur = 0
		}
	}
	for ino, alg := range want {
		if len(got[ino]) != 1 || !got[ino][alg] {
			t.Errorf("inode %d: extents compressed %v, want all %s", ino, got[ino], alg)
		}
	}
}
