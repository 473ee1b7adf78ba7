package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// TestCompressFlag: cp, write and edit take --compress ALG[:LEVEL] as
// the kernel takes compress=, and mkfs --compress makes the image's
// compression property decide for files added later without the flag.
func TestCompressFlag(t *testing.T) {
	btrfstest.RequireProgs(t)
	dir := t.TempDir()
	host := filepath.Join(dir, "data")
	if err := os.WriteFile(host, bytes.Repeat([]byte("compress me please "), 20000), 0o644); err != nil {
		t.Fatal(err)
	}
	img := filepath.Join(dir, "img")
	src := filepath.Join(dir, "src")
	os.Mkdir(src, 0o755)
	for _, args := range [][]string{
		{"mkfs", "-q", "-b", "256M", "-r", src, "--compress", "lzo", img},
		{"cp", "--compress", "zstd:5", host, img + ":/cp"},
		{"write", "--compress", "zlib", "-f", host, img + ":/write"},
		{"cp", host, img + ":/inherited"},
	} {
		if _, stderr, code := run(t, args...); code != ExitOK {
			t.Fatalf("%q: exit %d, %s", args, code, stderr)
		}
	}
	if _, stderr, code := runIn(t, []byte("write -f "+host+" /edit\n"), "edit", "--compress", "zstd", img); code != ExitOK {
		t.Fatalf("edit --compress: %s", stderr)
	}
	if _, _, code := run(t, "cp", "--compress", "brotli", host, img+":/x"); code != ExitUsage {
		t.Errorf("cp --compress brotli: exit %d, want %d", code, ExitUsage)
	}
	fsys, err := btrfs.Open(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[uint64]string{}
	// Every file here is made in the top directory and inherits its
	// property (lzo), which beats --compress as it beats compress= in
	// the kernel.
	for p, alg := range map[string]string{"/inherited": "lzo", "/cp": "lzo", "/write": "lzo", "/edit": "lzo"} {
		fi, err := fsys.Lstat(strings.TrimPrefix(p, "/"))
		if err != nil {
			t.Fatal(err)
		}
		want[fi.Sys().(*btrfs.Stat).Ino] = alg
	}
	fsys.Close()
	btrfstest.CheckCompression(t, img, want)

	// In an image without the property, the flag decides.
	img2 := filepath.Join(dir, "img2")
	for _, args := range [][]string{
		{"mkfs", "-q", "-b", "256M", img2},
		{"cp", "--compress", "zstd:5", host, img2 + ":/cp"},
		{"write", "--compress", "zlib", "-f", host, img2 + ":/write"},
		{"cp", host, img2 + ":/plain"},
	} {
		if _, stderr, code := run(t, args...); code != ExitOK {
			t.Fatalf("%q: exit %d, %s", args, code, stderr)
		}
	}
	if _, stderr, code := runIn(t, []byte("write -f "+host+" /edit\n"), "edit", "--compress", "lzo", img2); code != ExitOK {
		t.Fatalf("edit --compress: %s", stderr)
	}
	fsys, err = btrfs.Open(img2, nil)
	if err != nil {
		t.Fatal(err)
	}
	want = map[uint64]string{}
	for p, alg := range map[string]string{"/cp": "zstd", "/write": "zlib", "/edit": "lzo", "/plain": "none"} {
		fi, err := fsys.Lstat(strings.TrimPrefix(p, "/"))
		if err != nil {
			t.Fatal(err)
		}
		want[fi.Sys().(*btrfs.Stat).Ino] = alg
	}
	fsys.Close()
	btrfstest.CheckCompression(t, img2, want)
	btrfstest.Check(t, []string{img}, true)
	btrfstest.Check(t, []string{img2}, true)
}
