package cli

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
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
	checkExtentCompression(t, img, want)

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
	checkExtentCompression(t, img2, want)
	btrfstest.Check(t, []string{img}, true)
	btrfstest.Check(t, []string{img2}, true)
}

var (
	extentItemRe = regexp.MustCompile(`^\s+item \d+ key \((\d+) EXTENT_DATA \d+\)`)
	extentCompRe = regexp.MustCompile(`\bcompression (\d+)`)
)

// checkExtentCompression checks with dump-tree that every data extent of
// each inode in want is stored with the named compression.
func checkExtentCompression(t *testing.T, img string, want map[uint64]string) {
	t.Helper()
	out, err := exec.Command("btrfs", "inspect-internal", "dump-tree", "-t", "5", img).CombinedOutput()
	if err != nil {
		t.Fatalf("dump-tree: %v\n%s", err, out)
	}
	names := []string{"none", "zlib", "lzo", "zstd"}
	got := map[uint64]map[string]bool{}
	var cur uint64
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if m := extentItemRe.FindStringSubmatch(line); m != nil {
			cur, _ = strconv.ParseUint(m[1], 10, 64)
			continue
		}
		if m := extentCompRe.FindStringSubmatch(line); m != nil && cur != 0 {
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
			t.Errorf("inode %d: extents %v, want all %s", ino, got[ino], alg)
		}
	}
}
