package btrfs_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
	"github.com/gobtrfs/btrfs/internal/ctree"
	"github.com/gobtrfs/btrfs/internal/disk"
	"github.com/gobtrfs/btrfs/internal/fsview"
)

// treeBlockForms counts the extent items of tree blocks by form (skinny
// METADATA_ITEMs, EXTENT_ITEMs with a tree block info) and fails t if an
// EXTENT_ITEM's tree block info names another level than the block has:
// btrfs check reads the level from there.
func treeBlockForms(t *testing.T, fsys *btrfs.FS) (skinny, full int) {
	t.Helper()
	v := fsview.Of(fsys)
	trees, err := v.Trees()
	if err != nil {
		t.Fatal(err)
	}
	var root ctree.Root
	for _, tr := range trees {
		if tr.ID == disk.ExtentTreeObjectID {
			root = tr.Root
		}
	}
	c := ctree.NewCursor(v.BlockReader(), root)
	ok, err := c.First()
	for ; ok && err == nil; ok, err = c.Next() {
		k := c.Key()
		switch k.Type {
		case disk.MetadataItemKey:
			skinny++
		case disk.ExtentItemKey:
			var it disk.ExtentItem
			if err := it.Decode(c.Data()); err != nil {
				t.Fatalf("extent item %v: %v", k, err)
			}
			if it.Flags&disk.ExtentFlagTreeBlock == 0 {
				continue
			}
			full++
			if it.TreeBlock == nil {
				t.Fatalf("tree block extent item %v without tree block info", k)
			}
			n, err := v.ReadBlockAt(disk.LogicalAddr(k.ObjectID))
			if err != nil {
				t.Fatalf("tree block of %v: %v", k, err)
			}
			if n.Level() != int(it.TreeBlock.Level) {
				t.Errorf("extent item %v: tree block info level %d, block level %d", k, it.TreeBlock.Level, n.Level())
			}
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	return skinny, full
}

// oldFormMaker is a mkfs.btrfs the old-form tests make their images with:
// the installed one (6.2), and btrfs-progs 6.19's when
// btrfstest.ProgsDirEnv names it (with the block-group tree, its default,
// and checked by its own btrfs check too: 6.19's check flags every image
// 6.2 makes, so it runs on 6.19's images only).
type oldFormMaker struct {
	name  string
	newer bool
}

func oldFormMakers() []oldFormMaker {
	out := []oldFormMaker{{name: "progs-6.2"}}
	if btrfstest.ProgsDir() != "" {
		out = append(out, oldFormMaker{name: "progs-6.19", newer: true})
	}
	return out
}

// mkfs makes an image of size bytes with args.
func (m oldFormMaker) mkfs(t *testing.T, size int64, args ...string) string {
	t.Helper()
	if !m.newer {
		return btrfstest.Mkfs(t, btrfstest.MkfsOptions{Size: size, Extra: args})
	}
	img := filepath.Join(t.TempDir(), "newer.img")
	if err := os.WriteFile(img, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, size); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(btrfstest.ProgsDir(), "mkfs.btrfs"), append(append([]string{"-q"}, args...), img)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %v\n%s", cmd, err, out)
	}
	return img
}

// check runs btrfs check with data checksums (and 6.19's for its images).
func (m oldFormMaker) check(t *testing.T, img string) {
	t.Helper()
	btrfstest.Check(t, []string{img}, true)
	if m.newer {
		btrfstest.CheckNewer(t, img, true)
	}
}

// TestNoSkinnyForm writes to an image made with mkfs.btrfs -O
// ^skinny-metadata and finds every tree block recorded in that form:
// EXTENT_ITEMs whose tree block info carries the block's level, never a
// METADATA_ITEM; btrfs check is clean, and the kernel reads the files.
func TestNoSkinnyForm(t *testing.T) {
	btrfstest.RequireInterop(t)
	for _, mk := range oldFormMakers() {
		t.Run(mk.name, func(t *testing.T) { testNoSkinnyForm(t, mk) })
	}
}

func testNoSkinnyForm(t *testing.T, mk oldFormMaker) {
	img := mk.mkfs(t, 128<<20, "-n", "4096", "-O", "^skinny-metadata")
	fsys := openWritable(t, []string{img})
	if fsview.Of(fsys).Superblock().IncompatFlags&disk.IncompatSkinnyMetadata != 0 {
		t.Fatal("mkfs.btrfs -O ^skinny-metadata made a skinny filesystem")
	}
	rng := rand.New(rand.NewPCG(testSeed(t), 17))
	want := map[string][]byte{}
	for i := range 300 {
		name := fmt.Sprintf("f%03d", i)
		data := make([]byte, rng.IntN(9000))
		for j := range data {
			data[j] = byte(rng.Uint32())
		}
		if err := fsys.WriteFile(name, data, 0o644); err != nil {
			t.Fatal(err)
		}
		want[name] = data
	}
	if err := fsys.Sync(); err != nil {
		t.Fatal(err)
	}
	skinny, full := treeBlockForms(t, fsys)
	t.Logf("%d tree block EXTENT_ITEMs, %d METADATA_ITEMs", full, skinny)
	if skinny != 0 || full < 10 {
		t.Errorf("%d METADATA_ITEMs and %d tree block EXTENT_ITEMs, want none and many", skinny, full)
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	mk.check(t, img)
	dir := btrfstest.Mount(t, "ro", img)
	for name, data := range want {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || !bytes.Equal(got, data) {
			t.Errorf("kernel reads %s: %d bytes (err %v), want %d", name, len(got), err, len(data))
		}
	}
	btrfstest.Unmount(t, dir)
}

// TestMixedChunkAlloc fills a small mixed filesystem (mkfs.btrfs --mixed:
// one DATA|METADATA chunk) with data and metadata until new DATA|METADATA
// chunks are needed and then until the device is full: every new chunk is
// mixed, the space accounting stays exact (btrfs check with data csums),
// ENOSPC is clean, files can still be removed when full, and the kernel
// writes more on the result.
func TestMixedChunkAlloc(t *testing.T) {
	btrfstest.RequireInterop(t)
	for _, mk := range oldFormMakers() {
		t.Run(mk.name, func(t *testing.T) { testMixedChunkAlloc(t, mk) })
	}
}

func testMixedChunkAlloc(t *testing.T, mk oldFormMaker) {
	img := mk.mkfs(t, 64<<20, "--mixed")
	devs := []string{img}
	fsys := openWritable(t, devs)
	if fsview.Of(fsys).Superblock().IncompatFlags&disk.IncompatMixedGroups == 0 {
		t.Fatal("mkfs.btrfs --mixed made no MIXED_GROUPS filesystem")
	}
	mixed := func(fsys *btrfs.FS) int {
		n := 0
		for c := range fsview.Of(fsys).ChunkMap().All() {
			switch c.Type() & disk.BlockGroupTypeMask {
			case disk.BlockGroupData | disk.BlockGroupMetadata:
				n++
			case disk.BlockGroupSystem:
			default:
				t.Fatalf("chunk %d of type %#x on a mixed filesystem", c.Logical(), c.Type())
			}
		}
		return n
	}
	chunks0 := mixed(fsys)
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 18))
	var key [32]byte
	binary.LittleEndian.PutUint64(key[:], seed)
	fill := rand.NewChaCha8(key) // file contents, faster than rng byte by byte
	want := map[string][]byte{}
	full := false
	for i := 0; !full; i++ {
		name := fmt.Sprintf("d%02d/f%04d", i/200, i)
		if i%200 == 0 {
			if err := fsys.Mkdir(fmt.Sprintf("d%02d", i/200), 0o755); err != nil {
				if errors.Is(err, syscall.ENOSPC) {
					break
				}
				t.Fatal(err)
			}
		}
		// Mostly small files (inline: metadata), some of 64 KiB to 1 MiB.
		size := rng.IntN(2000)
		if i%8 == 0 {
			size = 64<<10 + rng.IntN(1<<20)
		}
		data := make([]byte, size)
		fill.Read(data)
		err := fsys.WriteFile(name, data, 0o644)
		switch {
		case errors.Is(err, syscall.ENOSPC):
			// Refused up front: the data did not fit, and the
			// metadata reserve kept the filesystem usable.
			full = true
			if err := fsys.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("remove the file that did not fit: %v", err)
			}
		case err != nil:
			t.Fatalf("file %d: %v", i, err)
		default:
			want[name] = data
		}
		if i%100 == 99 {
			if err := fsys.Sync(); err != nil {
				if errors.Is(err, syscall.ENOSPC) {
					t.Fatalf("commit after file %d: %v (the change should have been refused up front)", i, err)
				}
				t.Fatal(err)
			}
		}
	}
	if err := fsys.Sync(); err != nil {
		t.Fatal(err)
	}
	n := mixed(fsys)
	t.Logf("%d files until ENOSPC; %d mixed chunks (mkfs made %d)", len(want), n, chunks0)
	if n <= chunks0 {
		t.Errorf("%d mixed chunks after filling, mkfs made %d: no new chunk", n, chunks0)
	}
	// Full: removing files must still work (it needs metadata space).
	removed := 0
	for name := range want {
		if removed == len(want)/4 {
			break
		}
		if err := fsys.Remove(name); err != nil {
			t.Fatalf("remove %s on a full filesystem: %v", name, err)
		}
		delete(want, name)
		if removed++; removed%20 == 0 {
			if err := fsys.Sync(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	mk.check(t, img)
	dir := btrfstest.Mount(t, "", img)
	for name, data := range want {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || !bytes.Equal(got, data) {
			t.Errorf("kernel reads %s: %d bytes (err %v), want %d", name, len(got), err, len(data))
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "kernel-more"), bytes.Repeat([]byte("k"), 1<<20), 0o644); err != nil {
		t.Errorf("kernel writes after ours: %v", err)
	}
	btrfstest.Unmount(t, dir)
	mk.check(t, img)
}

// TestConvertedSkinnyForm changes a filesystem that holds both forms: made
// without skinny metadata, filled by the kernel, then converted with
// btrfstune -x, which sets SKINNY_METADATA and leaves the old blocks'
// EXTENT_ITEMs. We free old blocks (removing the kernel's files) and
// record ours as METADATA_ITEMs; check is clean, the kernel reads the
// result and writes more.
func TestConvertedSkinnyForm(t *testing.T) {
	btrfstest.RequireInterop(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{Size: 128 << 20, NodeSize: 4096, Features: "^skinny-metadata"})
	seed := testSeed(t)
	dir := btrfstest.Mount(t, "", img)
	btrfstest.PopulateFiles(t, dir, int64(seed))
	btrfstest.PopulateBigDir(t, dir, int64(seed), 400)
	btrfstest.Unmount(t, dir)
	if out, err := exec.Command("btrfstune", "-x", img).CombinedOutput(); err != nil {
		t.Fatalf("btrfstune -x: %v\n%s", err, out)
	}
	fsys := openWritable(t, []string{img})
	if fsview.Of(fsys).Superblock().IncompatFlags&disk.IncompatSkinnyMetadata == 0 {
		t.Fatal("btrfstune -x left the filesystem without skinny metadata")
	}
	skinny0, full0 := treeBlockForms(t, fsys)
	if full0 == 0 {
		t.Fatal("no tree block EXTENT_ITEM before our changes: the image does not hold the old form")
	}
	ents, err := fsys.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if err := fsys.RemoveAll(e.Name()); err != nil {
			t.Fatalf("remove %s: %v", e.Name(), err)
		}
	}
	want := map[string][]byte{}
	rng := rand.New(rand.NewPCG(seed, 19))
	for i := range 200 {
		name := fmt.Sprintf("n%03d", i)
		data := bytes.Repeat([]byte{byte(rng.Uint32())}, rng.IntN(20000))
		if err := fsys.WriteFile(name, data, 0o644); err != nil {
			t.Fatal(err)
		}
		want[name] = data
	}
	if err := fsys.Sync(); err != nil {
		t.Fatal(err)
	}
	skinny, full := treeBlockForms(t, fsys)
	t.Logf("tree block items before: %d METADATA_ITEM, %d EXTENT_ITEM; after: %d, %d", skinny0, full0, skinny, full)
	if full >= full0 || skinny <= skinny0 {
		t.Errorf("the old EXTENT_ITEMs were not freed or ours not recorded as METADATA_ITEMs")
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	btrfstest.Check(t, []string{img}, true)
	dir = btrfstest.Mount(t, "", img)
	for name, data := range want {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || !bytes.Equal(got, data) {
			t.Errorf("kernel reads %s: %d bytes (err %v), want %d", name, len(got), err, len(data))
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "kernel-more"), bytes.Repeat([]byte("k"), 1<<20), 0o644); err != nil {
		t.Errorf("kernel writes after ours: %v", err)
	}
	btrfstest.Unmount(t, dir)
	btrfstest.Check(t, []string{img}, true)
}
