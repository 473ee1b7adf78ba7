package txn_test

import (
	"encoding/binary"
	"math/rand"
	"os"
	"testing"

	"github.com/gobtrfs/btrfs/internal/btrfstest"
	"github.com/gobtrfs/btrfs/internal/disk"
	"github.com/gobtrfs/btrfs/internal/txn"
)

// A prepared commit (a Flight) lets the next transaction begin and even
// prepare before it is durable. The next transaction must not allocate
// the bytes the first one freed until the first is durable, and the
// second's Finish makes the first durable before itself: the superblocks
// on disk go from one generation to the next, never skipping back.
func TestFlightOverlap(t *testing.T) {
	btrfstest.RequireProgs(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{Size: 256 << 20, NodeSize: 4096})
	rng := rand.New(rand.NewSource(1))
	have := map[string][]byte{}
	commitXattrs(t, img, rng, 300, have) // a tree of some height to copy

	fs, err := txn.Open([]string{img})
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	gen0 := fs.Generation()
	change := func() *txn.Txn {
		t.Helper()
		tx, err := fs.Begin()
		if err != nil {
			t.Fatal(err)
		}
		fsTree, err := tx.Tree(disk.FSTreeObjectID)
		if err != nil {
			t.Fatal(err)
		}
		touchTop(t, tx, fsTree)
		addXattrs(t, tx, fsTree, rng, 200, have)
		return tx
	}

	f1, err := change().Prepare()
	if err != nil {
		t.Fatal(err)
	}
	freedByT1 := fs.Space().Pinned().Clone()
	if freedByT1.Bytes() == 0 {
		t.Fatal("the first transaction freed nothing: the test shows nothing")
	}
	if fs.Generation() != gen0+1 {
		t.Fatalf("after Prepare the FS builds on generation %d, want %d", fs.Generation(), gen0+1)
	}
	if sb := onDiskGeneration(t, img); sb != gen0 {
		t.Fatalf("superblock on disk at generation %d before Finish, want %d", sb, gen0)
	}

	t2 := change() // begins and changes while the first commit is on its way
	for r := range freedByT1.All() {
		if !fs.Space().Pinned().Contains(r.Start, r.End) {
			t.Fatalf("bytes [%d, %d) freed by the commit in flight were handed out again", r.Start, r.End)
		}
	}
	f2, err := t2.Prepare()
	if err != nil {
		t.Fatal(err)
	}
	if err := f2.Finish(); err != nil { // finishes f1 first
		t.Fatal(err)
	}
	if err := f1.Finish(); err != nil {
		t.Fatalf("the first commit, finished through the second: %v", err)
	}
	if sb := onDiskGeneration(t, img); sb != gen0+2 {
		t.Fatalf("superblock on disk at generation %d, want %d", sb, gen0+2)
	}

	t3, err := fs.Begin() // releases what the durable commits freed
	if err != nil {
		t.Fatal(err)
	}
	for r := range freedByT1.All() {
		if fs.Space().Pinned().Overlaps(r.Start, r.End) {
			t.Fatalf("bytes [%d, %d) still pinned after their commit is durable", r.Start, r.End)
		}
	}
	t3.Abort()
	if err := fs.Close(); err != nil {
		t.Fatal(err)
	}
	btrfstest.Check(t, []string{img}, false)
	checkXattrs(t, img, have)
}

// onDiskGeneration reads the primary superblock's generation from img.
func onDiskGeneration(t *testing.T, img string) disk.Generation {
	t.Helper()
	f, err := os.Open(img)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b [8]byte
	if _, err := f.ReadAt(b[:], int64(disk.SuperblockOffsetOf(0))+0x48); err != nil {
		t.Fatal(err)
	}
	return disk.Generation(binary.LittleEndian.Uint64(b[:]))
}
