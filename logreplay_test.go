package btrfs_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/blockdev"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
	"github.com/gobtrfs/btrfs/internal/disk"
)

func logMust(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// logRootOf is the log_root of img's primary superblock.
func logRootOf(t *testing.T, img string) uint64 {
	t.Helper()
	f, err := blockdev.OpenFile(img, true)
	logMust(t, err)
	defer f.Close()
	sb, _, err := blockdev.ReadSuper(f, 0)
	logMust(t, err)
	return uint64(sb.LogRoot)
}

func fileSum(t *testing.T, p string) [32]byte {
	b, err := os.ReadFile(p)
	logMust(t, err)
	return sha256.Sum256(b)
}

var logDiff = btrfstest.DiffOptions{CompareNlink: true, IgnoreHoles: true}

func diffTrees(t *testing.T, what string, want, got *btrfstest.Tree) {
	t.Helper()
	for _, d := range btrfstest.Diff(want, got, logDiff) {
		t.Errorf("%s: %s", what, d)
	}
}

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i*7+i/4096)
	}
	return b
}

// TestLogReplayFixtures replays the committed log fixtures (made by the
// kernel, see TestGenLogFixtures) without root or a kernel: the read-only
// open shows what the kernel showed after its replay (the manifest) and
// leaves the image alone; the writable open replays, shows the same,
// writes on; the result opens again with our change and no log.
func TestLogReplayFixtures(t *testing.T) {
	names := btrfstest.LogFixtureNames(t)
	if len(names) == 0 {
		t.Fatal("no log fixtures in testdata/images")
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			img := btrfstest.OpenFixture(t, name)
			if logRootOf(t, img) == 0 {
				t.Fatal("fixture has no log tree")
			}
			want := btrfstest.LoadManifest(t, name)
			before := fileSum(t, img)
			ro, err := btrfs.Open(img, nil)
			logMust(t, err)
			diffTrees(t, "read-only open vs kernel", want, ops2Read(t, ro))
			logMust(t, ro.Close())
			if fileSum(t, img) != before {
				t.Fatal("read-only open changed the image")
			}
			last, err := btrfs.Open(img, &btrfs.Options{NoLogReplay: true})
			logMust(t, err)
			if len(btrfstest.Diff(want, ops2Read(t, last), logDiff)) == 0 {
				t.Error("the last commit already shows what the kernel shows: nothing to replay")
			}
			logMust(t, last.Close())
			if _, err := btrfs.OpenWritable(img, &btrfs.Options{NoLogReplay: true}); err == nil {
				t.Fatal("OpenWritable with NoLogReplay accepted")
			}

			fsys, err := btrfs.OpenWritable(img, nil)
			logMust(t, err)
			diffTrees(t, "writable open vs kernel", want, ops2Read(t, fsys))
			logMust(t, fsys.WriteFile("ours", pattern(30000, 3), 0o644))
			logMust(t, fsys.Close())
			if logRootOf(t, img) != 0 {
				t.Fatal("log_root still set after the replay")
			}
			again, err := btrfs.Open(img, nil)
			logMust(t, err)
			got := ops2Read(t, again)
			logMust(t, again.Close())
			if got.Entries["ours"] == nil {
				t.Error("our file is gone after reopening")
			}
			delete(got.Entries, "ours")
			opts := logDiff
			opts.IgnoreDirMtime = true // our file changed the top directory
			for _, d := range btrfstest.Diff(want, got, opts) {
				t.Errorf("reopened vs kernel: %s", d)
			}
			if _, err := exec.LookPath("btrfs"); err == nil {
				btrfstest.Check(t, []string{img}, true)
			}
		})
	}
}

// logLeafCopies finds the physical offsets of the copies of the tree
// block at logical addr in img by its header (bytenr at 0x30, fsid at
// 0x20), which is all a test needs on a small image.
func logLeafCopies(t *testing.T, img []byte, addr uint64, ns int, fsid []byte) []int {
	var out []int
	for off := 0; off+ns <= len(img); off += ns {
		b := img[off:]
		if binary.LittleEndian.Uint64(b[0x30:]) == addr && bytes.Equal(b[0x20:0x30], fsid) {
			out = append(out, off)
		}
	}
	return out
}

// TestLogReplayDamaged: a log whose items are damaged (with valid block
// checksums, so the damage reaches the item decoders) never panics an
// open; where a writable open succeeds, btrfs check still passes.
func TestLogReplayDamaged(t *testing.T) {
	src := btrfstest.OpenFixture(t, "log-new-files")
	orig, err := os.ReadFile(src)
	logMust(t, err)
	f, err := blockdev.OpenFile(src, true)
	logMust(t, err)
	sb, _, err := blockdev.ReadSuper(f, 0)
	f.Close()
	logMust(t, err)
	ns := int(sb.NodeSize)
	fsid := sb.MetadataFSID()
	// The log root tree's leaf names the log tree's root.
	roots := logLeafCopies(t, orig, uint64(sb.LogRoot), ns, fsid[:])
	if len(roots) == 0 || sb.LogRootLevel != 0 {
		t.Fatalf("log root leaf not found (level %d)", sb.LogRootLevel)
	}
	rl := disk.Node(orig[roots[0] : roots[0]+ns])
	var ri disk.RootItem
	logMust(t, ri.Decode(rl.ItemData(0)))
	if ri.Level != 0 {
		t.Skipf("log tree has level %d", ri.Level)
	}
	leaves := logLeafCopies(t, orig, uint64(ri.Bytenr), ns, fsid[:])
	if len(leaves) == 0 {
		t.Fatal("log tree leaf not found")
	}
	leaf := disk.Node(orig[leaves[0] : leaves[0]+ns])
	dataStart := disk.HeaderSize + leaf.NumItems()*disk.ItemSize
	rng := rand.New(rand.NewPCG(testSeed(t), 7))
	img := filepath.Join(t.TempDir(), "damaged.img")
	runs := 12
	if os.Getenv("GOBTRFS_LONG") == "1" {
		runs = 400
	}
	opened := 0
	_, lerr := exec.LookPath("btrfs")
	checkable := lerr == nil
	for i := range runs {
		b := bytes.Clone(orig)
		blk := slices.Clone(b[leaves[0] : leaves[0]+ns])
		for range 1 + rng.IntN(4) {
			// Damage item data, or an item's offset/size now and then.
			off := dataStart + rng.IntN(ns-dataStart)
			if rng.IntN(8) == 0 {
				off = disk.HeaderSize + rng.IntN(dataStart-disk.HeaderSize)
			}
			blk[off] ^= byte(1 + rng.IntN(255))
		}
		sb.CsumType.SumBlock(blk)
		for _, o := range leaves {
			copy(b[o:], blk)
		}
		logMust(t, os.WriteFile(img, b, 0o644))
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Fatalf("damage %d: panic: %v", i, p)
				}
			}()
			if ro, err := btrfs.Open(img, nil); err == nil {
				readAll(ro)
				ro.Close()
			}
			if w, err := btrfs.OpenWritable(img, nil); err == nil {
				opened++
				if err := w.Close(); err != nil {
					t.Logf("damage %d: close: %v", i, err)
				} else if checkable {
					btrfstest.Check(t, []string{img}, false)
				}
			}
		}()
	}
	t.Logf("%d of %d damaged logs replayed", opened, runs)
}

// readAll reads every file and directory of fsys, ignoring errors.
func readAll(fsys *btrfs.FS) {
	fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			fsys.ReadFile(p)
		}
		if err == nil {
			fsys.Xattrs(p)
		}
		return nil
	})
}
