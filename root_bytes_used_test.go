package btrfs_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// treeIDArg is the dump-tree -t argument of the tree a ROOT_ITEM key's
// object id names, as dump-tree prints it ("" for one to leave alone).
func treeIDArg(name string) string {
	ids := map[string]string{
		"EXTENT_TREE": "2", "DEV_TREE": "4", "FS_TREE": "5", "CSUM_TREE": "7",
		"QUOTA_TREE": "8", "UUID_TREE": "9", "FREE_SPACE_TREE": "10", "BLOCK_GROUP_TREE": "11",
		"DATA_RELOC_TREE": "18446744073709551607",
	}
	if id, ok := ids[name]; ok {
		return id
	}
	if _, err := strconv.ParseUint(name, 10, 64); err == nil {
		return name
	}
	return ""
}

var (
	rootItemRE  = regexp.MustCompile(`key \((\S+) ROOT_ITEM (\d+)\)`)
	bytesUsedRE = regexp.MustCompile(`bytes_used (\d+)`)
	blockRE     = regexp.MustCompile(`(?m)^(leaf \d+ items|node \d+ level) `)
)

// rootUsage reads, with btrfs-progs, every ROOT_ITEM's bytes_used and the
// node size times the blocks a walk of that tree finds (dump-tree prints
// each block, shared or not, once per tree reaching it).
func rootUsage(t *testing.T, img string, nodesize uint64) (used, walked map[string]uint64) {
	t.Helper()
	used, walked = map[string]uint64{}, map[string]uint64{}
	lines := strings.Split(dumpTree(t, img, "root"), "\n")
	for i, l := range lines {
		m := rootItemRE.FindStringSubmatch(l)
		if m == nil || !strings.Contains(l, "itemoff") || i+1 >= len(lines) {
			continue
		}
		b := bytesUsedRE.FindStringSubmatch(lines[i+1])
		if b == nil {
			t.Fatalf("root item %s: no bytes_used in %q", m[1], lines[i+1])
		}
		arg := treeIDArg(m[1])
		if arg == "" {
			continue
		}
		v, _ := strconv.ParseUint(b[1], 10, 64)
		used[m[1]] = v
		walked[m[1]] = nodesize * uint64(len(blockRE.FindAllString(dumpTree(t, img, arg), -1)))
	}
	return used, walked
}

// checkRootUsage fails for every tree whose ROOT_ITEM bytes_used is not
// nodesize × the blocks it reaches, and returns how many trees it saw.
func checkRootUsage(t *testing.T, img string, nodesize uint64, when string) int {
	t.Helper()
	used, walked := rootUsage(t, img, nodesize)
	for name, u := range used {
		if u != walked[name] {
			t.Errorf("%s: tree %s bytes_used %d, its blocks take %d (%d nodes)", when, name, u, walked[name], walked[name]/nodesize)
		}
	}
	return len(used)
}

// TestRootBytesUsed: ROOT_ITEM bytes_used is nodesize × the blocks of the
// tree after our writes grow trees by splits and shrink them by merges
// over several commits (a snapshot included: it starts with its source's
// value, and each keeps its own as they part), as mkfs and the kernel
// keep it. Then the kernel removes most files read-write: it subtracts
// the blocks it frees from our values, which must stay exact (before
// this was kept, the extent tree's stayed at one node and the kernel took
// it below zero, issue 14's ENOSPC).
func TestRootBytesUsed(t *testing.T) {
	btrfstest.RequireInterop(t)
	const ns = 4096
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{NodeSize: ns, Size: 256 << 20})
	fsys := openWritable(t, []string{img})
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	_, err := fsys.CreateSubvolume("sv", nil)
	must(err)
	must(fsys.Mkdir("top", 0o755))
	data := func(i int) []byte { return bytes.Repeat([]byte{byte(i), byte(i >> 8), 7}, 3000+i%5000) }
	xattr := bytes.Repeat([]byte{'x'}, 300)
	for i := range 600 {
		for _, dir := range []string{"top", "sv"} {
			name := fmt.Sprintf("%s/f%04d", dir, i)
			must(fsys.WriteFile(name, data(i), 0o644))
			must(fsys.Setxattr(name, "user.pad", xattr))
		}
		if i%200 == 199 {
			must(fsys.Commit())
		}
	}
	must(fsys.Commit())
	_, err = fsys.Snapshot("sv", "snap", nil)
	must(err)
	must(fsys.Commit())
	// Shrink: remove most files of top and of sv (the snapshot keeps
	// sv's), over two commits; then grow top a little again.
	for i := range 600 {
		if i%10 == 0 {
			continue
		}
		must(fsys.Remove(fmt.Sprintf("top/f%04d", i)))
		if i%3 != 0 {
			must(fsys.Remove(fmt.Sprintf("sv/f%04d", i)))
		}
		if i == 300 {
			must(fsys.Commit())
		}
	}
	must(fsys.Commit())
	for i := range 100 {
		must(fsys.WriteFile(fmt.Sprintf("top/g%03d", i), data(i), 0o644))
	}
	must(fsys.Commit())
	must(fsys.Close())
	btrfstest.Check(t, []string{img}, true)
	if n := checkRootUsage(t, img, ns, "after our writes"); n < 6 {
		t.Fatalf("saw %d root items", n)
	}
	if t.Failed() {
		return
	}

	// The kernel removes most of what is left, read-write.
	mnt := btrfstest.Mount(t, "", img)
	for _, dir := range []string{"top", "sv", "snap"} {
		ents, err := os.ReadDir(filepath.Join(mnt, dir))
		must(err)
		for i, e := range ents {
			if i%8 != 0 {
				must(os.Remove(filepath.Join(mnt, dir, e.Name())))
			}
		}
	}
	must(exec.Command("sync", "-f", mnt).Run())
	btrfstest.Unmount(t, mnt)
	btrfstest.Check(t, []string{img}, true)
	used, _ := rootUsage(t, img, ns)
	for name, u := range used {
		if u > 256<<20 {
			t.Errorf("after the kernel's removals: tree %s bytes_used %d, past the image size (taken below zero)", name, u)
		}
	}
	checkRootUsage(t, img, ns, "after the kernel's removals")
}
