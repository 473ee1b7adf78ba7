package txn_test

import (
	"bytes"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/gobtrfs/btrfs/internal/btrfstest"
	"github.com/gobtrfs/btrfs/internal/ctree"
	"github.com/gobtrfs/btrfs/internal/disk"
	"github.com/gobtrfs/btrfs/internal/txn"
)

// fsBuilder makes files in the top directory of tree 5 by hand, the way
// the filesystem layer will: inode, names, file extent items, and the
// data references that go with them.
type fsBuilder struct {
	t    *testing.T
	tx   *txn.Txn
	tree *ctree.Tree
	want map[string][]byte // expected contents by name
	// tolerate: a failed data write is recorded in werr instead of
	// failing the test (the crash test cuts the power during them).
	tolerate bool
	werr     error
}

// newBuilder opens tree 5 of tx.
func newBuilder(t *testing.T, tx *txn.Txn, want map[string][]byte) *fsBuilder {
	t.Helper()
	tr, err := tx.Tree(disk.FSTreeObjectID)
	if err != nil {
		t.Fatal(err)
	}
	return &fsBuilder{t: t, tx: tx, tree: tr, want: want}
}

// now is the current time as a btrfs timespec.
func now() disk.Timespec {
	n := time.Now()
	return disk.Timespec{Sec: n.Unix(), Nsec: uint32(n.Nanosecond())}
}

// insert adds an item or fails the test.
func (b *fsBuilder) insert(k disk.Key, data []byte) {
	b.t.Helper()
	if err := b.tree.InsertItem(b.tx.Trans(), k, data); err != nil {
		b.t.Fatalf("insert %v: %v", k, err)
	}
}

// writeExtent allocates an extent for data (sector multiple), writes it
// with goroutines in parallel and records its checksums.
func (b *fsBuilder) writeExtent(data []byte) disk.LogicalAddr {
	b.t.Helper()
	a, err := b.tx.AllocData(uint64(len(data)), 0)
	if err != nil {
		b.t.Fatalf("alloc %d data bytes: %v", len(data), err)
	}
	ss := int(b.tx.SectorSize())
	parts := max(1, min(4, len(data)/ss))
	per := (len(data)/ss + parts - 1) / parts * ss
	var wg sync.WaitGroup
	errs := make([]error, parts)
	for i := 0; i < parts; i++ {
		lo, hi := min(i*per, len(data)), min((i+1)*per, len(data))
		if lo == hi {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = b.tx.WriteData(a+disk.LogicalAddr(lo), data[lo:hi])
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil && b.tolerate {
			b.werr = err
			return a
		}
		if err != nil {
			b.t.Fatalf("write data: %v", err)
		}
	}
	var sums []byte
	for off := 0; off < len(data); off += ss {
		sums = b.tx.CsumType().Sum(sums, data[off:off+ss])
	}
	if err := b.tx.AddCsums(a, sums); err != nil {
		b.t.Fatalf("add csums: %v", err)
	}
	return a
}

// createFile makes an empty regular file ino called name in directory
// 256 with DIR_INDEX idx.
func (b *fsBuilder) createFile(ino disk.ObjectID, name string, idx uint64) {
	b.t.Helper()
	gen, ts := b.tx.Generation(), now()
	it := disk.InodeItem{Generation: gen, TransID: gen, NLink: 1, Mode: 0o100644, ATime: ts, CTime: ts, MTime: ts, OTime: ts}
	buf := make([]byte, disk.InodeItemSize)
	it.Encode(buf)
	b.insert(disk.Key{ObjectID: ino, Type: disk.InodeItemKey}, buf)
	refs := disk.InodeRefs{{Index: idx, Name: []byte(name)}}
	buf = make([]byte, refs.Size())
	refs.Encode(buf)
	b.insert(disk.Key{ObjectID: ino, Type: disk.InodeRefKey, Offset: uint64(disk.FirstFreeInode)}, buf)
	d := disk.DirItems{{Location: disk.Key{ObjectID: ino, Type: disk.InodeItemKey}, TransID: gen, Type: disk.FtRegular, Name: []byte(name)}}
	buf = make([]byte, d.Size())
	d.Encode(buf)
	b.insert(disk.Key{ObjectID: disk.FirstFreeInode, Type: disk.DirItemKey, Offset: disk.NameHash([]byte(name))}, buf)
	b.insert(disk.Key{ObjectID: disk.FirstFreeInode, Type: disk.DirIndexKey, Offset: idx}, buf)
	b.updateInode(disk.FirstFreeInode, func(it *disk.InodeItem) { it.Size += 2 * uint64(len(name)) })
	b.want[name] = nil
}

// updateInode changes inode ino and stamps its transid and times.
func (b *fsBuilder) updateInode(ino disk.ObjectID, fn func(*disk.InodeItem)) {
	b.t.Helper()
	err := b.tree.UpdateItem(b.tx.Trans(), disk.Key{ObjectID: ino, Type: disk.InodeItemKey}, func(buf []byte) error {
		var it disk.InodeItem
		if err := it.Decode(buf); err != nil {
			return err
		}
		fn(&it)
		it.TransID, it.CTime, it.MTime = b.tx.Generation(), now(), now()
		it.Sequence++
		it.Encode(buf)
		return nil
	})
	if err != nil {
		b.t.Fatalf("update inode %d: %v", ino, err)
	}
}

// extentKey is the EXTENT_DATA key of ino at file offset off.
func extentKey(ino disk.ObjectID, off uint64) disk.Key {
	return disk.Key{ObjectID: ino, Type: disk.ExtentDataKey, Offset: off}
}

// putExtent maps [off, off+num) of file ino/name to the extent at addr
// (diskLen bytes) from extOff, as REG or PREALLOC, adds the data ref and
// updates size, nbytes and the expected contents (content is the whole
// extent's data, nil for prealloc).
func (b *fsBuilder) putExtent(ino disk.ObjectID, name string, off uint64, addr disk.LogicalAddr, diskLen, extOff, num uint64, content []byte) {
	b.t.Helper()
	typ := disk.FileExtentReg
	if content == nil {
		typ = disk.FileExtentPrealloc
	}
	fe := disk.FileExtentItem{Generation: b.tx.Generation(), RAMBytes: diskLen, Type: typ,
		DiskBytenr: addr, DiskNumBytes: diskLen, Offset: extOff, NumBytes: num}
	buf := make([]byte, fe.Size())
	fe.Encode(buf)
	b.insert(extentKey(ino, off), buf)
	if err := b.tx.AddDataRef(addr, diskLen, disk.FSTreeObjectID, ino, off-extOff, 1); err != nil {
		b.t.Fatalf("add data ref: %v", err)
	}
	b.updateInode(ino, func(it *disk.InodeItem) {
		it.NBytes += num
		it.Size = max(it.Size, off+num)
	})
	w := b.want[name]
	if uint64(len(w)) < off+num {
		w = append(w, make([]byte, off+num-uint64(len(w)))...)
	}
	if content != nil {
		copy(w[off:], content[extOff:extOff+num])
	} else {
		clear(w[off : off+num])
	}
	b.want[name] = w
}

// dropExtent removes the file extent item of ino at off and its data ref;
// the file's size becomes newSize.
func (b *fsBuilder) dropExtent(ino disk.ObjectID, name string, off, newSize uint64) {
	b.t.Helper()
	data, found, err := b.tree.Lookup(b.tx.Trans(), extentKey(ino, off))
	if err != nil || !found {
		b.t.Fatalf("lookup extent %d/%d: found %v err %v", ino, off, found, err)
	}
	var fe disk.FileExtentItem
	if err := fe.Decode(data); err != nil {
		b.t.Fatal(err)
	}
	if _, err := b.tree.DeleteItem(b.tx.Trans(), extentKey(ino, off)); err != nil {
		b.t.Fatal(err)
	}
	if err := b.tx.DropDataRef(fe.DiskBytenr, fe.DiskNumBytes, disk.FSTreeObjectID, ino, off-fe.Offset, 1); err != nil {
		b.t.Fatalf("drop data ref: %v", err)
	}
	b.updateInode(ino, func(it *disk.InodeItem) {
		it.NBytes -= fe.NumBytes
		it.Size = newSize
	})
	b.want[name] = b.want[name][:newSize]
}

// verifyFiles mounts devs read-only and compares every file of want.
func verifyFiles(t *testing.T, devs []string, want map[string][]byte) {
	t.Helper()
	dir := btrfstest.Mount(t, "ro", devs...)
	defer btrfstest.Unmount(t, dir)
	for name, w := range want {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatalf("read %s: %v", name, err)
		}
		if !bytes.Equal(got, w) {
			t.Fatalf("%s: got %d bytes, want %d (contents differ: %v)", name, len(got), len(w), len(got) == len(w))
		}
	}
}

// randBytes returns n random bytes.
func randBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	rng.Read(b)
	return b
}

// dataFormats are the images the data interop tests run on.
var dataFormats = []struct {
	name string
	opts btrfstest.MkfsOptions
}{
	{"16k-crc32c-dupmeta", btrfstest.MkfsOptions{NodeSize: 16384, MetadataProfile: "dup"}},
	{"4k-xxhash", btrfstest.MkfsOptions{NodeSize: 4096, Csum: "xxhash"}},
	{"4k-sha256-dupmeta", btrfstest.MkfsOptions{NodeSize: 4096, Csum: "sha256", MetadataProfile: "dup"}},
	{"16k-blake2", btrfstest.MkfsOptions{NodeSize: 16384, Csum: "blake2"}},
	{"raid1-2dev", btrfstest.MkfsOptions{NumDevices: 2, NodeSize: 16384, DataProfile: "raid1", MetadataProfile: "raid1"}},
}

// TestDataInterop writes files through data extents (shared, partly
// referenced, prealloc, multi-item checksums), checks the image with
// btrfs check --check-data-csum and the kernel, then drops references in
// two more commits until all data space is back.
func TestDataInterop(t *testing.T) {
	btrfstest.RequireInterop(t)
	for _, f := range dataFormats {
		t.Run(f.name, func(t *testing.T) {
			rng := rand.New(rand.NewSource(seed(t)))
			var devs []string
			if f.opts.NumDevices > 1 {
				devs = btrfstest.MkfsMulti(t, f.opts)
			} else {
				devs = []string{btrfstest.Mkfs(t, f.opts)}
			}
			want := map[string][]byte{}
			var used0 uint64
			dataCommitWant(t, devs, want, func(b *fsBuilder) { buildFiles(b, rng) }, &used0)
			btrfstest.Check(t, devs, true)
			verifyFiles(t, devs, want)
			if f.opts.NodeSize == 4096 {
				if n := dumpCount(t, devs[0], "extent", "EXTENT_DATA_REF"); n == 0 {
					t.Errorf("no keyed EXTENT_DATA_REF item on 4 KiB nodes with %d refs", manyRefs)
				}
			}
			dataCommitWant(t, devs, want, dropSome, nil)
			btrfstest.Check(t, devs, true)
			verifyFiles(t, devs, want)
			if u := openDataUsed(t, devs); u != used0+256<<10 {
				t.Errorf("data used %d after dropping, want %d + 256 KiB of extent a", u, used0)
			}
			dataCommitWant(t, devs, want, dropRest, nil)
			btrfstest.Check(t, devs, true)
			verifyFiles(t, devs, want)
			if u := openDataUsed(t, devs); u != used0 {
				t.Errorf("data used %d after dropping everything, want %d", u, used0)
			}
		})
	}
}

// dataCommitWant runs build in one transaction and commits; used, when
// not nil, receives the DATA bytes used before.
func dataCommitWant(t *testing.T, devs []string, want map[string][]byte, build func(*fsBuilder), used *uint64) {
	t.Helper()
	fs, err := txn.Open(devs)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	defer fs.Close()
	if used != nil {
		*used = dataUsed(fs)
	}
	tx, err := fs.Begin()
	if err != nil {
		t.Fatal(err)
	}
	build(newBuilder(t, tx, want))
	if err := tx.Commit(); err != nil {
		t.Fatalf("commit: %v", err)
	}
}

// openDataUsed opens devs and returns the DATA bytes used.
func openDataUsed(t *testing.T, devs []string) uint64 {
	t.Helper()
	fs, err := txn.Open(devs)
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	return dataUsed(fs)
}

// Inodes of the files buildFiles makes.
const (
	inoA, inoB, inoC, inoP, inoBig, inoM disk.ObjectID = 257, 258, 259, 260, 261, 262
	// manyRefs is how many file extent items of m share a's extent, each
	// with its own EXTENT_DATA_REF: more than fit inline on 4 KiB nodes.
	manyRefs = 12
)

// buildFiles makes: a (one 256 KiB extent), b (a reflink of a's extent
// plus a 64 KiB extent of its own), c (two middle pieces of a's extent,
// with a hole between), p (64 KiB prealloc), big (2 MiB whose sums
// need several csum items on 4 KiB nodes) and m (manyRefs 4 KiB pieces of
// a's extent, so its refs spill into keyed items).
func buildFiles(b *fsBuilder, rng *rand.Rand) {
	const k = 1 << 10
	for i, n := range []string{"a", "b", "c", "p", "big", "m"} {
		b.createFile(inoA+disk.ObjectID(i), n, uint64(2+i))
	}
	da := randBytes(rng, 256*k)
	a := b.writeExtent(da)
	b.putExtent(inoA, "a", 0, a, 256*k, 0, 256*k, da)
	b.putExtent(inoB, "b", 0, a, 256*k, 0, 256*k, da)
	dc := randBytes(rng, 64*k)
	c := b.writeExtent(dc)
	b.putExtent(inoB, "b", 256*k, c, 64*k, 0, 64*k, dc)
	b.putExtent(inoC, "c", 0, a, 256*k, 64*k, 64*k, da)
	b.putExtent(inoC, "c", 128*k, a, 256*k, 192*k, 64*k, da)
	for i := uint64(0); i < manyRefs; i++ {
		b.putExtent(inoM, "m", i*8*k, a, 256*k, i*4*k, 4*k, da)
	}
	p, err := b.tx.AllocData(64*k, 0)
	if err != nil {
		b.t.Fatal(err)
	}
	b.putExtent(inoP, "p", 0, p, 64*k, 0, 64*k, nil)
	dbig := randBytes(rng, 2048*k)
	big := b.writeExtent(dbig)
	b.putExtent(inoBig, "big", 0, big, 2048*k, 0, 2048*k, dbig)
	// A reservation never referenced: Commit must give it back.
	if _, err := b.tx.AllocData(16*k, 0); err != nil {
		b.t.Fatal(err)
	}
}

// dropSome truncates b, big and p to nothing and c to its first piece:
// only a's extent stays (referenced by a and c).
func dropSome(b *fsBuilder) {
	const k = 1 << 10
	b.dropExtent(inoB, "b", 256*k, 256*k)
	b.dropExtent(inoB, "b", 0, 0)
	b.dropExtent(inoBig, "big", 0, 0)
	b.dropExtent(inoP, "p", 0, 0)
	b.dropExtent(inoC, "c", 128*k, 64*k)
	for i := uint64(manyRefs - 1); i >= manyRefs/2; i-- {
		b.dropExtent(inoM, "m", i*8*k, i*8*k-4*k)
	}
}

// dropRest truncates a and c: no data extent is left.
func dropRest(b *fsBuilder) {
	const k = 1 << 10
	b.dropExtent(inoA, "a", 0, 0)
	b.dropExtent(inoC, "c", 0, 0)
	for i := manyRefs/2 - 1; i >= 0; i-- {
		size := uint64(0)
		if i > 0 {
			size = uint64(i)*8*k - 4*k
		}
		b.dropExtent(inoM, "m", uint64(i)*8*k, size)
	}
}

// dataGroups counts the DATA block groups and the bytes free in them.
func dataGroups(t *testing.T, devs []string) (n int, free uint64) {
	t.Helper()
	fs, err := txn.Open(devs)
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	for _, g := range fs.Space().Groups() {
		if g.Flags&disk.BlockGroupData != 0 {
			n++
			free += g.Length - g.Used
		}
	}
	return n, free
}

// TestDataNewChunk writes more data than the data chunks of a fresh
// 256 MiB image hold, over two commits, so AllocData must add DATA
// chunks; then frees one file. Every commit passes btrfs check with data
// checksums and reads back through the kernel.
func TestDataNewChunk(t *testing.T) {
	btrfstest.RequireInterop(t)
	for _, f := range []struct {
		name string
		opts btrfstest.MkfsOptions
	}{
		{"single", btrfstest.MkfsOptions{Size: 256 << 20, NodeSize: 16384}},
		{"raid1-2dev", btrfstest.MkfsOptions{Size: 256 << 20, NumDevices: 2, NodeSize: 16384, DataProfile: "raid1", MetadataProfile: "raid1"}},
	} {
		t.Run(f.name, func(t *testing.T) {
			rng := rand.New(rand.NewSource(seed(t)))
			var devs []string
			if f.opts.NumDevices > 1 {
				devs = btrfstest.MkfsMulti(t, f.opts)
			} else {
				devs = []string{btrfstest.Mkfs(t, f.opts)}
			}
			before, free := dataGroups(t, devs)
			want := map[string][]byte{}
			const mib = 1 << 20
			per := int(free/(3*mib))/2 + 1 // files per commit: two commits overflow the groups
			for c := 0; c < 2; c++ {
				dataCommitWant(t, devs, want, func(b *fsBuilder) {
					for i := 0; i < per; i++ {
						ino := disk.ObjectID(257 + per*c + i)
						name := fmt.Sprintf("f%d", ino)
						b.createFile(ino, name, uint64(2+per*c+i))
						d := randBytes(rng, 3*mib)
						a := b.writeExtent(d)
						b.putExtent(ino, name, 0, a, 3*mib, 0, 3*mib, d)
					}
				}, nil)
				btrfstest.Check(t, devs, true)
			}
			if after, _ := dataGroups(t, devs); after <= before {
				t.Fatalf("%d DATA groups after writing %d MiB, %d before", after, 6*per, before)
			}
			verifyFiles(t, devs, want)
			dataCommitWant(t, devs, want, func(b *fsBuilder) { b.dropExtent(257, "f257", 0, 0) }, nil)
			btrfstest.Check(t, devs, true)
			verifyFiles(t, devs, want)
		})
	}
}
