package check

import (
	"context"
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/blockdev"
	"github.com/gobtrfs/btrfs/internal/ctree"
	"github.com/gobtrfs/btrfs/internal/disk"
	"github.com/gobtrfs/btrfs/mkfs"
)

// makeImage formats a small image with our mkfs and fills it through our
// writer with one of each kind of thing the checker looks at: inline and
// regular files, a hole, a hard link, a symlink, an xattr, a directory
// tree, a subvolume, a rename and a removal.
func makeImage(t testing.TB) string {
	t.Helper()
	img := filepath.Join(t.TempDir(), "fs.img")
	if err := mkfs.Format(img, mkfs.Options{Size: 128 << 20}); err != nil {
		t.Fatal(err)
	}
	fsys, err := btrfs.OpenWritable(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	big := make([]byte, 300<<10)
	rand.Read(big)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(fsys.WriteFile("big", big, 0o644))
	must(fsys.WriteFile("small", []byte("hello, inline world\n"), 0o644))
	must(fsys.MkdirAll("d/e/f", 0o755))
	must(fsys.WriteFile("d/e/f/g", big[:9000], 0o600))
	must(fsys.WriteFile("d/gone", big[:5000], 0o600))
	must(fsys.Remove("d/gone"))
	must(fsys.Link("big", "d/big-link"))
	must(fsys.Symlink("../big", "d/sym"))
	must(fsys.Setxattr("small", "user.k", []byte("v")))
	must(fsys.WriteFile("sparse", big[:4096], 0o644))
	must(fsys.Truncate("sparse", 1<<20))
	must(fsys.Rename("d/e/f/g", "d/moved"))
	if _, err := fsys.CreateSubvolume("sub", nil); err != nil {
		t.Fatal(err)
	}
	must(fsys.WriteFile("sub/in-sub", big[:20000], 0o644))
	must(fsys.Close())
	return img
}

// runCheck runs the checker on img and returns its report.
func runCheck(t testing.TB, img string, dataCsum bool) Report {
	t.Helper()
	rep, err := Run(context.Background(), []string{img}, Options{DataCsum: dataCsum})
	if err != nil {
		t.Fatalf("check %s: %v", img, err)
	}
	return rep
}

func problemsText(rep Report) string {
	var b strings.Builder
	for _, p := range rep.Problems {
		b.WriteString(string(p.Kind) + ": " + p.Message + "\n")
	}
	return b.String()
}

// openChecker returns a checker over img with the root items loaded, for
// tests that look inside the image to damage it.
func openChecker(t testing.TB, img string) *checker {
	t.Helper()
	return openCheckerDevs(t, []string{img})
}

// openCheckerDevs is openChecker for a filesystem on several devices.
func openCheckerDevs(t testing.TB, devs []string) *checker {
	t.Helper()
	set, err := blockdev.ScanWith(devs, blockdev.ScanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { set.Close() })
	c, err := newChecker(context.Background(), set, Options{Workers: 1, MemoryLimit: DefaultMemoryLimit})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.loadRoots(); err != nil {
		t.Fatal(err)
	}
	return c
}

// findItem returns a copy of the leaf holding the first item of tree id
// for which match is true, and its slot.
func findItem(t testing.TB, c *checker, id disk.ObjectID, match func(k disk.Key, data []byte) bool) (disk.Node, int) {
	t.Helper()
	tr, ok := c.tree(id)
	if !ok {
		t.Fatalf("no tree %d", id)
	}
	cur := ctree.NewCursor(c, tr.root)
	ok, err := cur.First()
	for ; ok && err == nil; ok, err = cur.Next() {
		if match(cur.Key(), cur.Data()) {
			leaf := append(disk.Node(nil), cur.Leaf()...)
			return leaf, cur.Slot()
		}
	}
	t.Fatalf("tree %d: no matching item (err %v)", id, err)
	return nil, 0
}

// writeBlock re-checksums block (when resum) and writes it over every
// copy of the tree block at its address in the single-device image img.
func writeBlock(t testing.TB, c *checker, img string, block disk.Node, resum bool) {
	t.Helper()
	writeBlockAt(t, c, img, block.Bytenr(), block, resum)
}

// writeBlockAt is writeBlock for a block whose header may be damaged.
func writeBlockAt(t testing.TB, c *checker, img string, addr disk.LogicalAddr, block disk.Node, resum bool) {
	t.Helper()
	if resum {
		c.sb.CsumType.SumBlock(block)
	}
	mp, err := c.m.Mirrors(addr, uint64(len(block)))
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(img, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, loc := range mp.Copies {
		if _, err := f.WriteAt(block, int64(loc.Physical)); err != nil {
			t.Fatal(err)
		}
	}
}

// deleteItem removes item slot from leaf, keeping the leaf packed.
func deleteItem(leaf disk.Node, slot int) {
	nr := leaf.NumItems()
	it := leaf.ItemHeader(slot)
	size := int(it.Size)
	// Data of later items sits below this one's: move it up by size.
	dataEnd := disk.HeaderSize + int(leaf.ItemHeader(nr-1).Offset)
	copy(leaf[dataEnd+size:disk.HeaderSize+int(it.Offset)+size], leaf[dataEnd:disk.HeaderSize+int(it.Offset)])
	for i := slot + 1; i < nr; i++ {
		h := leaf.ItemHeader(i)
		h.Offset += uint32(size)
		disk.PutItemHeader(leaf, i-1, h)
	}
	h := leaf.Header()
	h.NumItems = uint32(nr - 1)
	h.Encode(leaf)
}

// hasProblem reports whether rep has a problem of kind whose message
// contains substr.
func hasProblem(rep Report, kind Kind, substr string) bool {
	for _, p := range rep.Problems {
		if p.Kind == kind && strings.Contains(p.Message, substr) {
			return true
		}
	}
	return false
}
