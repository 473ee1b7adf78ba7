package txn_test

import (
	"crypto/sha256"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gobtrfs/btrfs/internal/btrfstest"
	"github.com/gobtrfs/btrfs/internal/ctree"
	"github.com/gobtrfs/btrfs/internal/disk"
	"github.com/gobtrfs/btrfs/internal/txn"
)

// inodeKey is the key of the top directory's INODE_ITEM in tree 5.
var inodeKey = disk.Key{ObjectID: disk.FirstFreeInode, Type: disk.InodeItemKey}

// touchTop sets the top directory's mtime and ctime to now and its transid
// to the transaction's, as any change of the inode must.
func touchTop(t *testing.T, tx *txn.Txn, fsTree *ctree.Tree) {
	t.Helper()
	now := time.Now()
	ts := disk.Timespec{Sec: now.Unix(), Nsec: uint32(now.Nanosecond())}
	err := fsTree.UpdateItem(tx.Trans(), inodeKey, func(b []byte) error {
		var ino disk.InodeItem
		if err := ino.Decode(b); err != nil {
			return err
		}
		ino.MTime, ino.CTime, ino.TransID = ts, ts, tx.Generation()
		ino.Sequence++
		ino.Encode(b)
		return nil
	})
	if err != nil {
		t.Fatalf("update inode 256: %v", err)
	}
}

// addXattrs inserts n user xattrs on inode 256 whose names are new and
// whose hashes collide with nothing in have (which it extends).
func addXattrs(t *testing.T, tx *txn.Txn, fsTree *ctree.Tree, rng *rand.Rand, n int, have map[string][]byte) {
	t.Helper()
	hashes := map[uint64]bool{}
	for name := range have {
		hashes[disk.NameHash([]byte(name))] = true
	}
	for added := 0; added < n; {
		name := fmt.Sprintf("user.gobtrfs.%d.%d", tx.Generation(), rng.Int63())
		h := disk.NameHash([]byte(name))
		if hashes[h] {
			continue
		}
		value := make([]byte, rng.Intn(200))
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

// commitXattrs runs one transaction on img that touches the top directory
// and adds n xattrs, and returns the fs tree level after it.
func commitXattrs(t *testing.T, img string, rng *rand.Rand, n int, have map[string][]byte) int {
	t.Helper()
	fs, err := txn.Open([]string{img})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	defer fs.Close()
	old := fs.Super()
	tx, err := fs.Begin()
	if err != nil {
		t.Fatal(err)
	}
	fsTree, err := tx.Tree(disk.FSTreeObjectID)
	if err != nil {
		t.Fatal(err)
	}
	touchTop(t, tx, fsTree)
	addXattrs(t, tx, fsTree, rng, n, have)
	level := fsTree.Root().Level
	gen := tx.Generation()
	if err := tx.Commit(); err != nil {
		t.Fatalf("commit: %v", err)
	}
	if fs.Generation() != gen {
		t.Fatalf("generation after commit %d, want %d", fs.Generation(), gen)
	}
	checkBackup(t, fs, &old)
	return level
}

// checkBackup checks that the commit after old went into the backup slot
// following old's and recorded the new roots.
func checkBackup(t *testing.T, fs *txn.FS, old *disk.Superblock) {
	t.Helper()
	sb := fs.Super()
	slot := -1
	for i, b := range old.BackupRoots {
		if b.TreeRootGen == old.Generation {
			slot = (i + 1) % disk.NumBackupRoots
		}
	}
	if slot < 0 {
		t.Fatalf("no backup root of generation %d before the commit", old.Generation)
	}
	b := sb.BackupRoots[slot]
	if b.TreeRootGen != sb.Generation || b.TreeRoot != sb.Root || b.BytesUsed != sb.BytesUsed {
		t.Errorf("backup slot %d: root %d gen %d used %d; super root %d gen %d used %d",
			slot, b.TreeRoot, b.TreeRootGen, b.BytesUsed, sb.Root, sb.Generation, sb.BytesUsed)
	}
	for i := range sb.BackupRoots {
		if i != slot && sb.BackupRoots[i] != old.BackupRoots[i] {
			t.Errorf("backup slot %d changed", i)
		}
	}
}

// checkXattrs mounts img read-only and compares the xattrs of its top
// directory with want.
func checkXattrs(t *testing.T, img string, want map[string][]byte) {
	t.Helper()
	checkXattrsDevs(t, []string{img}, want)
}

// checkXattrsDevs is checkXattrs for a filesystem of several devices.
func checkXattrsDevs(t *testing.T, devs []string, want map[string][]byte) {
	t.Helper()
	dir := btrfstest.Mount(t, "ro", devs...)
	defer btrfstest.Unmount(t, dir)
	buf := make([]byte, 4096)
	for name, v := range want {
		n, err := unix.Getxattr(dir, name, buf)
		if err != nil {
			t.Fatalf("getxattr %s: %v", name, err)
		}
		if string(buf[:n]) != string(v) {
			t.Fatalf("xattr %s: got %d bytes %x, want %d bytes %x", name, n, buf[:n], len(v), v)
		}
	}
}

// seed returns the random seed, from GOBTRFS_SEED when set, and logs it.
func seed(t *testing.T) int64 {
	s := time.Now().UnixNano()
	if v := os.Getenv("GOBTRFS_SEED"); v != "" {
		fmt.Sscan(v, &s)
	}
	t.Logf("seed %d (replay with GOBTRFS_SEED=%d)", s, s)
	return s
}

var formats = []struct {
	name string
	opts btrfstest.MkfsOptions
}{
	{"16k-crc32c", btrfstest.MkfsOptions{NodeSize: 16384}},
	{"4k-xxhash", btrfstest.MkfsOptions{NodeSize: 4096, Csum: "xxhash"}},
	{"16k-sha256-dupmeta", btrfstest.MkfsOptions{NodeSize: 16384, Csum: "sha256", MetadataProfile: "dup"}},
}

// TestCommitXattrs changes the top directory in one small transaction and
// checks the image with btrfs check and the kernel.
func TestCommitXattrs(t *testing.T) {
	for _, f := range formats {
		t.Run(f.name, func(t *testing.T) {
			rng := rand.New(rand.NewSource(seed(t)))
			img := btrfstest.Mkfs(t, f.opts)
			have := map[string][]byte{}
			commitXattrs(t, img, rng, 5, have)
			btrfstest.Check(t, []string{img}, false)
			checkXattrs(t, img, have)
		})
	}
}

// TestCommitMany grows the fs tree past one leaf and commits several
// times in a row; every commit must pass btrfs check.
func TestCommitMany(t *testing.T) {
	for _, f := range formats {
		t.Run(f.name, func(t *testing.T) {
			rng := rand.New(rand.NewSource(seed(t)))
			img := btrfstest.Mkfs(t, f.opts)
			have := map[string][]byte{}
			level := 0
			for i := 0; i < 4; i++ {
				level = commitXattrs(t, img, rng, 150, have)
				btrfstest.Check(t, []string{img}, false)
			}
			if level < 1 {
				t.Errorf("fs tree level %d after %d xattrs, want >= 1", level, len(have))
			}
			checkXattrs(t, img, have)
			// A read-write mount makes the kernel use the free-space
			// tree and extent tree we wrote; its own commit must
			// leave a clean image too.
			dir := btrfstest.Mount(t, "", img)
			if err := os.WriteFile(filepath.Join(dir, "after"), []byte("kernel write"), 0o644); err != nil {
				t.Fatal(err)
			}
			btrfstest.Unmount(t, dir)
			btrfstest.Check(t, []string{img}, true)
			commitXattrs(t, img, rng, 20, have)
			btrfstest.Check(t, []string{img}, true)
			checkXattrs(t, img, have)
		})
	}
}

// TestCommitChunkTree copies the chunk tree's root (a block of the SYSTEM
// group) together with an fs tree change: the superblock's chunk root
// must follow and the image stay clean.
func TestCommitChunkTree(t *testing.T) {
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
			ct, err := tx.Tree(disk.ChunkTreeObjectID)
			if err != nil {
				t.Fatal(err)
			}
			devKey := disk.Key{ObjectID: disk.DevItemsObjectID, Type: disk.DevItemKey, Offset: 1}
			if err := ct.UpdateItem(tx.Trans(), devKey, func([]byte) error { return nil }); err != nil {
				t.Fatal(err)
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
			if sb.ChunkRoot == old.ChunkRoot || sb.ChunkRootGeneration != sb.Generation {
				t.Errorf("chunk root %d gen %d, was %d gen %d, super gen %d",
					sb.ChunkRoot, sb.ChunkRootGeneration, old.ChunkRoot, old.ChunkRootGeneration, sb.Generation)
			}
			if g := fs.Space().Group(uint64(sb.ChunkRoot)); g == nil || g.Flags&disk.BlockGroupSystem == 0 {
				t.Errorf("chunk root %d not in a SYSTEM group", sb.ChunkRoot)
			}
			if err := fs.Close(); err != nil {
				t.Fatal(err)
			}
			btrfstest.Check(t, []string{img}, false)
			checkXattrs(t, img, have)
		})
	}
}

// hashFile returns the SHA-256 of a file's content.
func hashFile(t *testing.T, path string) [32]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return [32]byte(h.Sum(nil))
}

// TestAbort leaves the image byte for byte unchanged, and the image still
// takes a normal commit afterwards.
func TestAbort(t *testing.T) {
	rng := rand.New(rand.NewSource(seed(t)))
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{})
	before := hashFile(t, img)
	fs, err := txn.Open([]string{img})
	if err != nil {
		t.Fatal(err)
	}
	tx, err := fs.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fs.Begin(); err == nil {
		t.Fatal("second Begin while a transaction runs succeeded")
	}
	fsTree, err := tx.Tree(disk.FSTreeObjectID)
	if err != nil {
		t.Fatal(err)
	}
	touchTop(t, tx, fsTree)
	addXattrs(t, tx, fsTree, rng, 200, map[string][]byte{})
	tx.Abort()
	if err := tx.Commit(); err == nil {
		t.Fatal("Commit after Abort succeeded")
	}
	if after := hashFile(t, img); after != before {
		t.Fatal("image changed by an aborted transaction")
	}
	// An empty transaction after the abort: the commit must still copy
	// the root tree's root, whose generation the superblock repeats.
	tx, err = fs.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatalf("empty commit: %v", err)
	}
	if err := fs.Close(); err != nil {
		t.Fatal(err)
	}
	btrfstest.Check(t, []string{img}, false)
	commitXattrs(t, img, rng, 10, map[string][]byte{})
	btrfstest.Check(t, []string{img}, false)
}
