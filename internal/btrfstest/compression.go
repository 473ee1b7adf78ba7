package btrfstest

import (
	"bufio"
	"bytes"
	"os/exec"
	"regexp"
	"strconv"
	"testing"
)

var (
	dumpExtentItemRe = regexp.MustCompile(`^\s+item \d+ key \((\d+) EXTENT_DATA \d+\)`)
	dumpCompressRe   = regexp.MustCompile(`\bcompression (\d+)`)
)

// CheckCompression reads btrfs-progs' dump-tree of the top-level
// subvolume (tree 5) of img and checks that every file extent item of
// each inode in want names the compression want gives it: "none",
// "zlib", "lzo" or "zstd".
func CheckCompression(tb testing.TB, img string, want map[uint64]string) {
	tb.Helper()
	RequireProgs(tb)
	out, err := exec.Command("btrfs", "inspect-internal", "dump-tree", "-t", "5", img).CombinedOutput()
	if err != nil {
		tb.Fatalf("dump-tree: %v\n%s", err, out)
	}
	names := []string{"none", "zlib", "lzo", "zstd"}
	got := map[uint64]map[string]bool{}
	var cur uint64
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if m := dumpExtentItemRe.FindStringSubmatch(line); m != nil {
			cur, _ = strconv.ParseUint(m[1], 10, 64)
			continue
		}
		if m := dumpCompressRe.FindStringSubmatch(line); m != nil && cur != 0 {
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
			tb.Errorf("inode %d: extents compressed %v, want all %s", ino, got[ino], alg)
		}
	}
}
