package btrfs_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
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
	btrfstest.CheckCompression(t, img, want)

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
	btrfstest.CheckCompression(t, img, want)
}
