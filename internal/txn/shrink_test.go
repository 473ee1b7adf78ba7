package txn_test

import (
	"errors"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/gobtrfs/btrfs/internal/btrfstest"
	"github.com/gobtrfs/btrfs/internal/disk"
	"github.com/gobtrfs/btrfs/internal/txn"
)

// shrinkFormats are the images the shrink tests run on.
var shrinkFormats = []struct {
	name string
	opts btrfstest.MkfsOptions
	// dataMiB is how much file data the first commit writes.
	dataMiB int
	// maxMiB bounds the shrunk size: what the layout allows without
	// moving anything (see each case).
	maxMiB uint64
}{
	// The 8 MiB data chunk overflows into a ~102 MiB data chunk placed
	// after metadata (ending at 139.4 MiB): it is cut to its 12 MiB used.
	{"1g-16k-dupmeta", btrfstest.MkfsOptions{Size: 1 << 30, NodeSize: 16384}, 20, 160},
	// Everything fits the mkfs chunks: the last one is cut.
	{"1g-4k-single", btrfstest.MkfsOptions{Size: 1 << 30, NodeSize: 4096, MetadataProfile: "single"}, 4, 40},
	// The DUP data chunk ends the device, stripes at 101 and 165 MiB:
	// both are cut to the used 6 MiB, the second one ends at 171 MiB.
	{"256m-16k-dupdata", btrfstest.MkfsOptions{Size: 256 << 20, NodeSize: 16384, DataProfile: "dup", MetadataProfile: "dup"}, 6, 172},
	{"256m-4k-single", btrfstest.MkfsOptions{Size: 256 << 20, NodeSize: 4096, DataProfile: "single", MetadataProfile: "single"}, 12, 40},
}

// writeFiles writes files of 1 MiB random data (mib of them) starting at
// inode first, in the transaction of b.
func writeFiles(b *fsBuilder, rng *rand.Rand, first disk.ObjectID, mib int) {
	for i := 0; i < mib; i++ {
		ino := first + disk.ObjectID(i)
		name := fmt.Sprintf("f%d", ino)
		b.createFile(ino, name, uint64(ino))
		d := randBytes(rng, 1<<20)
		a := b.writeExtent(d)
		b.putExtent(ino, name, 0, a, 1<<20, 0, 1<<20, d)
	}
}

// fillImage writes xattrs and mib MiB of files to img in one commit.
func fillImage(t *testing.T, img string, rng *rand.Rand, mib int, want map[string][]byte) {
	t.Helper()
	inTxn(t, img, func(tx *txn.Txn) {
		addBigXattrs(t, tx, rng, 30, 1500, map[string][]byte{})
		writeFiles(newBuilder(t, tx, want), rng, 257, mib)
	})
}

// shrinkOnce opens img, shrinks it in one transaction (fn, if not nil,
// runs first in the same transaction), commits, truncates the file to the
// new size and checks the superblock.
func shrinkOnce(t *testing.T, img string, fn func(tx *txn.Txn)) uint64 {
	t.Helper()
	fs, err := txn.Open([]string{img})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	defer fs.Close()
	tx, err := fs.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if fn != nil {
		fn(tx)
	}
	size, err := tx.Shrink()
	if err != nil {
		tx.Abort()
		t.Fatalf("shrink: %v", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatalf("commit: %v", err)
	}
	if sb := fs.Super(); sb.TotalBytes != size || sb.DevItem.TotalBytes != size {
		t.Fatalf("super total_bytes %d, dev_item total_bytes %d, Shrink returned %d", sb.TotalBytes, sb.DevItem.TotalBytes, size)
	}
	var layout strings.Builder
	for _, g := range fs.Space().Groups() {
		fmt.Fprintf(&layout, " [%d +%d %#x used %d]", g.Start, g.Length, g.Flags, g.Used)
	}
	t.Logf("groups after shrink:%s", layout.String())
	if err := fs.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, int64(size)); err != nil {
		t.Fatal(err)
	}
	return size
}

// superField reads a number field of `btrfs inspect-internal dump-super`.
func superField(t *testing.T, img, field string) uint64 {
	t.Helper()
	out, err := exec.Command("btrfs", "inspect-internal", "dump-super", img).CombinedOutput()
	if err != nil {
		t.Fatalf("dump-super: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(field) + `\s+(\d+)$`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("dump-super: no %s in\n%s", field, out)
	}
	v, _ := strconv.ParseUint(string(m[1]), 10, 64)
	return v
}

// checkShrunk checks a shrunk image: btrfs check with data checksums,
// dump-super's sizes, the file size, and our files read back through the
// read-only library.
func checkShrunk(t *testing.T, img string, size uint64, want map[string][]byte) {
	t.Helper()
	btrfstest.Check(t, []string{img}, true)
	if got := superField(t, img, "total_bytes"); got != size {
		t.Errorf("dump-super total_bytes %d, want %d", got, size)
	}
	if got := superField(t, img, "dev_item.total_bytes"); got != size {
		t.Errorf("dump-super dev_item.total_bytes %d, want %d", got, size)
	}
	names := make([]string, 0, len(want))
	for n := range want {
		names = append(names, n)
	}
	got, err := readFiles(loadMem(t, img), names)
	if err != nil {
		t.Fatal(err)
	}
	if !sameFiles(got, want, names) {
		t.Fatal("files read back differ from what was written")
	}
}

// TestShrink writes metadata and data, shrinks in a second transaction,
// truncates and checks; then shrinks again (at most the headroom goes),
// and once more in a transaction that also writes data into a new chunk.
func TestShrink(t *testing.T) {
	btrfstest.RequireProgs(t)
	for _, f := range shrinkFormats {
		t.Run(f.name, func(t *testing.T) {
			rng := rand.New(rand.NewSource(seed(t)))
			img := btrfstest.Mkfs(t, f.opts)
			want := map[string][]byte{}
			fillImage(t, img, rng, f.dataMiB, want)
			size := shrinkOnce(t, img, nil)
			t.Logf("%d MiB image with %d MiB of files shrunk to %d bytes (%.1f MiB)", f.opts.Size>>20, f.dataMiB, size, float64(size)/(1<<20))
			if size > f.maxMiB<<20 {
				t.Errorf("shrunk to %d bytes, more than %d MiB", size, f.maxMiB)
			}
			checkShrunk(t, img, size, want)
			again := shrinkOnce(t, img, nil)
			if again > size || size-again > 1<<20 {
				t.Errorf("second shrink: %d bytes after %d", again, size)
			}
			checkShrunk(t, img, again, want)
		})
	}
}

// TestShrinkNewChunk writes more data than the image has room for in one
// transaction, so a DATA chunk is added at the end of the device, and
// shrinks twice in the same transaction: the new chunk itself is cut.
func TestShrinkNewChunk(t *testing.T) {
	btrfstest.RequireProgs(t)
	rng := rand.New(rand.NewSource(seed(t)))
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{Size: 256 << 20, NodeSize: 16384})
	want := map[string][]byte{}
	before := fileSize(t, img)
	var first uint64
	size := shrinkOnce(t, img, func(tx *txn.Txn) {
		writeFiles(newBuilder(t, tx, want), rng, 257, 12)
		var err error
		if first, err = tx.Shrink(); err != nil {
			t.Fatalf("first shrink: %v", err)
		}
	})
	t.Logf("shrunk to %d bytes (%.1f MiB), first call %d", size, float64(size)/(1<<20), first)
	if size >= before/2 {
		t.Errorf("shrunk to %d bytes from %d", size, before)
	}
	if size > first || first-size > 1<<20 {
		t.Errorf("second Shrink in the same transaction: %d after %d", size, first)
	}
	checkShrunk(t, img, size, want)
}

// fileSize is the size of the file at path.
func fileSize(t *testing.T, path string) uint64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return uint64(st.Size())
}

// TestShrinkAbort shrinks and aborts: the image is unchanged byte for
// byte, and the filesystem (chunk map and free-space model restored)
// commits a later change cleanly.
func TestShrinkAbort(t *testing.T) {
	btrfstest.RequireProgs(t)
	rng := rand.New(rand.NewSource(seed(t)))
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{Size: 256 << 20, NodeSize: 4096, MetadataProfile: "dup"})
	want := map[string][]byte{}
	fillImage(t, img, rng, 3, want)
	before := hashFile(t, img)
	fs, err := txn.Open([]string{img})
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	groups := len(fs.Space().Groups())
	tx, err := fs.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Shrink(); err != nil {
		t.Fatal(err)
	}
	tx.Abort()
	if hashFile(t, img) != before {
		t.Fatal("image changed by an aborted shrink")
	}
	if n := len(fs.Space().Groups()); n != groups {
		t.Fatalf("%d groups after abort, %d before", n, groups)
	}
	tx, err = fs.Begin()
	if err != nil {
		t.Fatal(err)
	}
	addBigXattrs(t, tx, rng, 10, 1000, map[string][]byte{})
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	fs.Close()
	if got := superField(t, img, "total_bytes"); got != 256<<20 {
		t.Errorf("total_bytes %d after an aborted shrink", got)
	}
	btrfstest.Check(t, []string{img}, true)
}

// TestShrinkMultiDevice: several devices are refused.
func TestShrinkMultiDevice(t *testing.T) {
	btrfstest.RequireProgs(t)
	devs := btrfstest.MkfsMulti(t, btrfstest.MkfsOptions{NumDevices: 2})
	fs, err := txn.Open(devs)
	if err != nil {
		t.Skipf("open of a 2-device image needs the devices registered: %v", err)
	}
	defer fs.Close()
	tx, err := fs.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Abort()
	if _, err := tx.Shrink(); !errors.Is(err, txn.ErrUnsupported) {
		t.Fatalf("shrink of 2 devices: %v, want ErrUnsupported", err)
	}
}

// TestShrinkRemovesEmpty frees all file data, so the DATA chunk that was
// added at the end of the device is empty: Shrink removes it (another
// DATA chunk remains) and cuts the chunk before it.
func TestShrinkRemovesEmpty(t *testing.T) {
	btrfstest.RequireProgs(t)
	rng := rand.New(rand.NewSource(seed(t)))
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{Size: 256 << 20, NodeSize: 4096, MetadataProfile: "single"})
	want := map[string][]byte{}
	fillImage(t, img, rng, 12, want)
	before, _ := dataGroups(t, []string{img})
	inTxn(t, img, func(tx *txn.Txn) {
		b := newBuilder(t, tx, want)
		for i := 0; i < 12; i++ {
			ino := disk.ObjectID(257 + i)
			b.dropExtent(ino, fmt.Sprintf("f%d", ino), 0, 0)
		}
	})
	size := shrinkOnce(t, img, nil)
	after, _ := dataGroups(t, []string{img})
	t.Logf("shrunk to %d bytes; %d DATA groups before, %d after", size, before, after)
	if before < 2 || after != 1 {
		t.Errorf("%d DATA groups before shrinking, %d after: want the empty last one removed", before, after)
	}
	if size > 20<<20 {
		t.Errorf("shrunk to %d bytes, want at most 20 MiB", size)
	}
	checkShrunk(t, img, size, want)
}

// forceSystemChunk makes tx copy the chunk tree while the SYSTEM groups
// are full, so a new SYSTEM chunk is added (at the end of the device of a
// single-profile image), as TestChunkAllocSystem does.
func forceSystemChunk(t *testing.T, fs *txn.FS, tx *txn.Txn) {
	t.Helper()
	ns := uint64(fs.Super().NodeSize)
	var taken []uint64
	for {
		a, err := fs.Space().Alloc(disk.BlockGroupSystem, ns, ns)
		if err != nil {
			break
		}
		taken = append(taken, a)
	}
	ct, err := tx.Tree(disk.ChunkTreeObjectID)
	if err != nil {
		t.Fatal(err)
	}
	devKey := disk.Key{ObjectID: disk.DevItemsObjectID, Type: disk.DevItemKey, Offset: 1}
	if err := ct.UpdateItem(tx.Trans(), devKey, func([]byte) error { return nil }); err != nil {
		t.Fatal(err)
	}
	for _, a := range taken {
		if err := fs.Space().Release(a, ns); err != nil {
			t.Fatal(err)
		}
	}
}

// TestShrinkSystemChunk cuts a SYSTEM chunk at the end of the device,
// made in an earlier commit or in the shrinking transaction itself: the
// sys_chunk_array must carry the new length (the chunk root lives there).
func TestShrinkSystemChunk(t *testing.T) {
	btrfstest.RequireProgs(t)
	for _, sameTxn := range []bool{false, true} {
		t.Run(fmt.Sprintf("same-txn=%v", sameTxn), func(t *testing.T) {
			img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{Size: 256 << 20, NodeSize: 4096, MetadataProfile: "single"})
			if !sameTxn {
				fs, err := txn.Open([]string{img})
				if err != nil {
					t.Fatal(err)
				}
				tx, err := fs.Begin()
				if err != nil {
					t.Fatal(err)
				}
				forceSystemChunk(t, fs, tx)
				if err := tx.Commit(); err != nil {
					t.Fatal(err)
				}
				fs.Close()
			}
			fs, err := txn.Open([]string{img})
			if err != nil {
				t.Fatal(err)
			}
			tx, err := fs.Begin()
			if err != nil {
				t.Fatal(err)
			}
			if sameTxn {
				forceSystemChunk(t, fs, tx)
			}
			size, err := tx.Shrink()
			if err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			sb := fs.Super()
			fs.Close()
			sys, err := sb.SysChunks()
			if err != nil {
				t.Fatal(err)
			}
			last := sys[len(sys)-1]
			t.Logf("shrunk to %d; sys_chunk_array: %d chunks, last %d +%d", size, len(sys), last.Key.Offset, last.Chunk.Length)
			if len(sys) != 2 || last.Chunk.Length != 1<<20 {
				t.Errorf("sys_chunk_array: %d chunks, last of length %d; want 2, the new one cut to 1 MiB", len(sys), last.Chunk.Length)
			}
			if err := os.Truncate(img, int64(size)); err != nil {
				t.Fatal(err)
			}
			checkShrunk(t, img, size, nil)
			if btrfstest.Interop() {
				verifyFiles(t, []string{img}, nil)
			}
		})
	}
}
