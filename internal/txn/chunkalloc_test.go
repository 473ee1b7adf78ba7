package txn_test

import (
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/gobtrfs/btrfs/internal/btrfstest"
	"github.com/gobtrfs/btrfs/internal/chunk"
	"github.com/gobtrfs/btrfs/internal/disk"
	"github.com/gobtrfs/btrfs/internal/txn"
)

// metaGroups returns the flags of every METADATA block group of fs.
func metaGroups(fs *txn.FS) []uint64 {
	var out []uint64
	for _, g := range fs.Space().Groups() {
		if g.Flags&disk.BlockGroupMetadata != 0 {
			out = append(out, g.Flags)
		}
	}
	return out
}

// addBigXattrs inserts n xattrs on inode 256 with values of about size
// bytes (one per leaf for big nodes), new names and unique hashes.
func addBigXattrs(t *testing.T, tx *txn.Txn, rng *rand.Rand, n, size int, have map[string][]byte) {
	t.Helper()
	fsTree, err := tx.Tree(disk.FSTreeObjectID)
	if err != nil {
		t.Fatal(err)
	}
	touchTop(t, tx, fsTree)
	hashes := map[uint64]bool{}
	for name := range have {
		hashes[disk.NameHash([]byte(name))] = true
	}
	for added := 0; added < n; {
		name := fmt.Sprintf("user.big.%d.%d", tx.Generation(), rng.Int63())
		h := disk.NameHash([]byte(name))
		if hashes[h] {
			continue
		}
		value := make([]byte, size-rng.Intn(64))
		rng.Read(value)
		d := disk.DirItems{{TransID: tx.Generation(), Type: disk.FtXattr, Name: []byte(name), Data: value}}
		buf := make([]byte, d.Size())
		d.Encode(buf)
		key := disk.Key{ObjectID: disk.FirstFreeInode, Type: disk.XattrItemKey, Offset: h}
		if err := fsTree.InsertItem(tx.Trans(), key, buf); err != nil {
			t.Fatalf("insert xattr %s: %v", name, err)
		}
		hashes[h] = true
		have[name] = value
		added++
	}
}

// dumpCount counts the lines of `btrfs inspect-internal dump-tree -t tree`
// that contain what.
func dumpCount(t *testing.T, img, tree, what string) int {
	t.Helper()
	out, err := exec.Command("btrfs", "inspect-internal", "dump-tree", "-t", tree, img).CombinedOutput()
	if err != nil {
		t.Fatalf("dump-tree -t %s: %v\n%s", tree, err, out)
	}
	return strings.Count(string(out), what)
}

// sampleXattrs mounts devs read-only and reads back every step-th xattr.
func sampleXattrs(t *testing.T, devs []string, have map[string][]byte, step int) {
	t.Helper()
	dir := btrfstest.Mount(t, "ro", devs...)
	defer btrfstest.Unmount(t, dir)
	buf := make([]byte, 64<<10)
	i := 0
	for name, v := range have {
		if i++; i%step != 0 {
			continue
		}
		n, err := unix.Getxattr(dir, name, buf)
		if err != nil {
			t.Fatalf("getxattr %s: %v", name, err)
		}
		if string(buf[:n]) != string(v) {
			t.Fatalf("xattr %s: got %d bytes, want %d (content differs)", name, n, len(v))
		}
	}
}

// growUntilNewChunk commits transactions of big xattrs on devs until the
// filesystem has more METADATA groups than it started with, then one more
// transaction, checking each commit with btrfs check. It returns the
// METADATA group flags before and after.
func growUntilNewChunk(t *testing.T, devs []string, nodesize int, rng *rand.Rand, have map[string][]byte) (before, after []uint64) {
	t.Helper()
	size := nodesize - 400 // one xattr fills most of a leaf
	perTxn := 0
	extra := -1
	for round := 0; round < 12 && extra != 0; round++ {
		fs, err := txn.Open(devs)
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		if before == nil {
			before = metaGroups(fs)
			var bytes uint64
			for _, g := range fs.Space().Groups() {
				if g.Flags&disk.BlockGroupMetadata != 0 {
					bytes += g.Length
				}
			}
			// About three transactions fill what mkfs made.
			perTxn = int(max(bytes/3, 4<<20) / uint64(nodesize))
		}
		tx, err := fs.Begin()
		if err != nil {
			t.Fatal(err)
		}
		addBigXattrs(t, tx, rng, perTxn, size, have)
		if err := tx.Commit(); err != nil {
			t.Fatalf("round %d commit: %v", round, err)
		}
		after = metaGroups(fs)
		if err := fs.Close(); err != nil {
			t.Fatal(err)
		}
		btrfstest.Check(t, devs, false)
		switch {
		case extra > 0:
			extra--
		case len(after) > len(before):
			extra = 1
		}
		t.Logf("round %d: %d METADATA groups", round, len(after))
	}
	if len(after) <= len(before) {
		t.Fatalf("no METADATA chunk allocated: groups %v", after)
	}
	return before, after
}

// TestChunkAlloc fills the METADATA block groups of small filesystems
// until new chunks are needed, and checks the result with btrfs check,
// dump-tree and the kernel.
func TestChunkAlloc(t *testing.T) {
	btrfstest.RequireInterop(t)
	cases := []struct {
		name string
		opts btrfstest.MkfsOptions
		// fixture, if set, is the committed image to start from.
		fixture string
	}{
		{name: "16k-dup", opts: btrfstest.MkfsOptions{NodeSize: 16384, MetadataProfile: "dup"}},
		{name: "4k-single", opts: btrfstest.MkfsOptions{NodeSize: 4096, MetadataProfile: "single"}},
		// mkfs.btrfs 6.19's defaults: the new groups' items go to tree 11.
		{name: "16k-block-group-tree", opts: btrfstest.MkfsOptions{NodeSize: 16384}, fixture: "kernel-bgt-16k-crc32c"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rng := rand.New(rand.NewSource(seed(t)))
			var img string
			if c.fixture != "" {
				// The fixture is mkfs.btrfs's minimum size: the kernel
				// grows it to make room for new chunks.
				img = btrfstest.OpenFixture(t, c.fixture)
				if err := os.Truncate(img, btrfstest.DefaultImageSize); err != nil {
					t.Fatal(err)
				}
				dir := btrfstest.Mount(t, "", img)
				if out, err := exec.Command("btrfs", "filesystem", "resize", "max", dir).CombinedOutput(); err != nil {
					t.Fatalf("resize: %v\n%s", err, out)
				}
				btrfstest.Unmount(t, dir)
			} else {
				img = btrfstest.Mkfs(t, c.opts)
			}
			chunks := dumpCount(t, img, "chunk", "CHUNK_ITEM")
			groups := dumpCount(t, img, "11", "BLOCK_GROUP_ITEM") // 0 without the tree
			have := map[string][]byte{}
			before, after := growUntilNewChunk(t, []string{img}, c.opts.NodeSize, rng, have)
			checkProfiles(t, before, after)
			if got := dumpCount(t, img, "chunk", "CHUNK_ITEM"); got != chunks+len(after)-len(before) {
				t.Errorf("dump-tree: %d CHUNK_ITEMs, want %d", got, chunks+len(after)-len(before))
			}
			if c.fixture != "" {
				if got := dumpCount(t, img, "11", "BLOCK_GROUP_ITEM"); got != groups+len(after)-len(before) {
					t.Errorf("dump-tree: %d BLOCK_GROUP_ITEMs in tree 11, want %d", got, groups+len(after)-len(before))
				}
				if got := dumpCount(t, img, "extent", "BLOCK_GROUP_ITEM"); got != 0 {
					t.Errorf("dump-tree: %d BLOCK_GROUP_ITEMs in the extent tree, want none", got)
				}
			}
			sampleXattrs(t, []string{img}, have, 7)
			kernelWrites(t, []string{img})
		})
	}
}

// kernelWrites mounts devs read-write, lets the kernel add a file and
// metadata (it must accept the new chunks, group items and free-space
// tree entries), and checks the result.
func kernelWrites(t *testing.T, devs []string) {
	t.Helper()
	dir := btrfstest.Mount(t, "", devs...)
	data := make([]byte, 1<<20)
	for i := range data {
		data[i] = byte(i * 7)
	}
	if err := os.WriteFile(filepath.Join(dir, "after"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 200; i++ {
		if err := unix.Setxattr(dir, fmt.Sprintf("user.kernel.%d", i), data[:3000], 0); err != nil {
			t.Fatal(err)
		}
	}
	btrfstest.Unmount(t, dir)
	btrfstest.Check(t, devs, false)
}

// TestChunkAllocMulti does the same on several devices: the new chunk
// must have the profile mkfs chose, one stripe per device used.
func TestChunkAllocMulti(t *testing.T) {
	btrfstest.RequireInterop(t)
	cases := []struct {
		profile string
		devs    int
		flag    uint64
	}{
		{"raid1", 2, disk.BlockGroupRAID1},
		{"raid1c3", 3, disk.BlockGroupRAID1C3},
		{"raid0", 2, disk.BlockGroupRAID0},
		{"raid10", 4, disk.BlockGroupRAID10},
	}
	for _, c := range cases {
		t.Run(c.profile, func(t *testing.T) {
			rng := rand.New(rand.NewSource(seed(t)))
			devs := btrfstest.MkfsMulti(t, btrfstest.MkfsOptions{NumDevices: c.devs, NodeSize: 16384,
				MetadataProfile: c.profile, DataProfile: "single"})
			have := map[string][]byte{}
			before, after := growUntilNewChunk(t, devs, 16384, rng, have)
			checkProfiles(t, before, after)
			if after[len(after)-1]&c.flag == 0 {
				t.Errorf("new chunk flags %#x, want %s", after[len(after)-1], c.profile)
			}
			sampleXattrs(t, devs, have, 7)
			kernelWrites(t, devs)
		})
	}
}

// checkProfiles checks that every new METADATA group has the flags of the
// groups mkfs made.
func checkProfiles(t *testing.T, before, after []uint64) {
	t.Helper()
	for _, f := range after {
		if f != before[0] {
			t.Errorf("METADATA group flags %#x, mkfs made %#x", f, before[0])
		}
	}
}

// TestChunkAllocAbort allocates a chunk in a transaction that is then
// aborted: the chunk must vanish from the model, the image must stay
// unchanged and valid, and the next transaction must be able to allocate
// a chunk again.
func TestChunkAllocAbort(t *testing.T) {
	btrfstest.RequireInterop(t)
	rng := rand.New(rand.NewSource(seed(t)))
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{NodeSize: 16384, MetadataProfile: "dup"})
	hash := hashFile(t, img)
	fs, err := txn.Open([]string{img})
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	before := metaGroups(fs)
	tx, err := fs.Begin()
	if err != nil {
		t.Fatal(err)
	}
	have := map[string][]byte{}
	for i := 0; i < 64 && len(metaGroups(fs)) == len(before); i++ {
		addBigXattrs(t, tx, rng, 100, 16000, have)
	}
	if len(metaGroups(fs)) == len(before) {
		t.Fatal("no chunk allocated while filling the transaction")
	}
	tx.Abort()
	if got := metaGroups(fs); len(got) != len(before) {
		t.Fatalf("after abort: %d METADATA groups, want %d", len(got), len(before))
	}
	if hashFile(t, img) != hash {
		t.Fatal("aborted transaction changed the image")
	}
	btrfstest.Check(t, []string{img}, false)
	tx, err = fs.Begin()
	if err != nil {
		t.Fatal(err)
	}
	have = map[string][]byte{}
	for i := 0; i < 64 && len(metaGroups(fs)) == len(before); i++ {
		addBigXattrs(t, tx, rng, 100, 16000, have)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if hashFile(t, img) == hash {
		t.Fatal("commit changed nothing")
	}
	if err := fs.Close(); err != nil {
		t.Fatal(err)
	}
	btrfstest.Check(t, []string{img}, false)
	sampleXattrs(t, []string{img}, have, 5)
}

// TestChunkAllocSystem fills the SYSTEM group (the test takes its free
// space directly from the model) so that copying the chunk tree needs a
// new SYSTEM chunk, gives the space back before the commit, and checks
// that the new chunk is in the sys_chunk_array: the chunk root lives in
// it, so neither the kernel nor a reopen could read the chunk tree
// otherwise.
func TestChunkAllocSystem(t *testing.T) {
	btrfstest.RequireInterop(t)
	for _, f := range formats {
		t.Run(f.name, func(t *testing.T) {
			rng := rand.New(rand.NewSource(seed(t)))
			img := btrfstest.Mkfs(t, f.opts)
			fs, err := txn.Open([]string{img})
			if err != nil {
				t.Fatal(err)
			}
			defer fs.Close()
			old := fs.Super()
			tx, err := fs.Begin()
			if err != nil {
				t.Fatal(err)
			}
			ns := uint64(old.NodeSize)
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
			fsTree, err := tx.Tree(disk.FSTreeObjectID)
			if err != nil {
				t.Fatal(err)
			}
			have := map[string][]byte{}
			addXattrs(t, tx, fsTree, rng, 3, have)
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			sb := fs.Super()
			sys, err := sb.SysChunks()
			if err != nil {
				t.Fatal(err)
			}
			oldSys, _ := old.SysChunks()
			if len(sys) != len(oldSys)+1 {
				t.Fatalf("sys_chunk_array: %d chunks, want %d", len(sys), len(oldSys)+1)
			}
			last := sys[len(sys)-1]
			if r := uint64(sb.ChunkRoot); r < last.Key.Offset || r >= last.Key.Offset+last.Chunk.Length {
				t.Errorf("chunk root %d not in the new SYSTEM chunk %d", r, last.Key.Offset)
			}
			if err := fs.Close(); err != nil {
				t.Fatal(err)
			}
			fs2, err := txn.Open([]string{img})
			if err != nil {
				t.Fatalf("reopen: %v", err)
			}
			fs2.Close()
			btrfstest.Check(t, []string{img}, false)
			checkXattrs(t, img, have)
		})
	}
}

// TestChunkAllocRAID56 fills RAID5 metadata until a new METADATA chunk is
// made, of the RAID5 profile over all three devices (parity written by
// internal/chunk), and commits: btrfs check is clean.
func TestChunkAllocRAID56(t *testing.T) {
	btrfstest.RequireInterop(t)
	rng := rand.New(rand.NewSource(seed(t)))
	devs := btrfstest.MkfsMulti(t, btrfstest.MkfsOptions{NumDevices: 3, NodeSize: 16384,
		MetadataProfile: "raid5", DataProfile: "single"})
	fs, err := txn.Open(devs)
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	metaChunks := func() (n int) {
		for c := range fs.Chunks().All() {
			if c.Type()&disk.BlockGroupMetadata != 0 {
				if c.Profile() != chunk.RAID5 || c.NumStripes() != 3 {
					t.Fatalf("metadata chunk %v: want RAID5 over 3 devices", c)
				}
				n++
			}
		}
		return n
	}
	before := metaChunks()
	tx, err := fs.Begin()
	if err != nil {
		t.Fatal(err)
	}
	fsTree, err := tx.Tree(disk.FSTreeObjectID)
	if err != nil {
		t.Fatal(err)
	}
	value := make([]byte, 16000)
	for i := 0; metaChunks() == before; i++ {
		if i > 100000 {
			t.Fatal("RAID5 metadata never grew")
		}
		rng.Read(value)
		name := fmt.Sprintf("user.big.%d", i)
		d := disk.DirItems{{TransID: tx.Generation(), Type: disk.FtXattr, Name: []byte(name), Data: value}}
		buf := make([]byte, d.Size())
		d.Encode(buf)
		key := disk.Key{ObjectID: disk.FirstFreeInode, Type: disk.XattrItemKey, Offset: disk.NameHash([]byte(name))}
		if err := fsTree.InsertItem(tx.Trans(), key, buf); err != nil {
			t.Fatalf("insert %d: %v", i, err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := fs.Close(); err != nil {
		t.Fatal(err)
	}
	btrfstest.Check(t, devs, false)
}
