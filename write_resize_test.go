package btrfs_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/blockdev"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
	"github.com/gobtrfs/btrfs/mkfs"
)

// madeBy62 holds the images mkfs.btrfs (6.2, installed) made.
var madeBy62 = map[string]bool{}

// mkfs62 is btrfstest.Mkfs, noting the image in madeBy62.
func mkfs62(t *testing.T, opts btrfstest.MkfsOptions) string {
	t.Helper()
	img := btrfstest.Mkfs(t, opts)
	madeBy62[img] = true
	return img
}

// mkfsOurs formats an image of opts with our mkfs (6.19's defaults, the
// block-group tree among them).
func mkfsOurs(t *testing.T, opts mkfs.Options) string {
	t.Helper()
	img := filepath.Join(t.TempDir(), "ours.img")
	if err := mkfs.Format(img, opts); err != nil {
		t.Fatal(err)
	}
	return img
}

// resizeTo resizes device 1 of the image file img to size as the
// command does: the file is extended first when growing past its end.
func resizeTo(t *testing.T, img string, size uint64) error {
	t.Helper()
	fi, err := os.Stat(img)
	if err != nil {
		t.Fatal(err)
	}
	if uint64(fi.Size()) < size {
		if err := os.Truncate(img, int64(size)); err != nil {
			t.Fatal(err)
		}
	}
	fsys, err := btrfs.OpenWritable(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, rerr := fsys.Resize(1, size)
	if err := fsys.Close(); err != nil && rerr == nil {
		rerr = err
	}
	return rerr
}

// checkResized runs btrfs check (and 6.19's where named, on images not
// made by mkfs.btrfs 6.2, whose leftover free-space entries of its
// temporary chunks 6.19 flags) and checks the sizes the superblock and
// the device item give, and the image file's.
func checkResized(t *testing.T, img string, size uint64) {
	t.Helper()
	btrfstest.Check(t, []string{img}, true)
	if !madeBy62[img] {
		btrfstest.CheckNewer(t, img, true)
	}
	fsys, err := btrfs.Open(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	info, err := fsys.Info()
	if err != nil {
		t.Fatal(err)
	}
	if info.TotalBytes != size || len(info.Devices) != 1 || info.Devices[0].TotalBytes != size {
		t.Errorf("after resizing to %d: total_bytes %d, devices %+v", size, info.TotalBytes, info.Devices)
	}
	if fi, err := os.Stat(img); err != nil || uint64(fi.Size()) < size {
		t.Errorf("image file after resizing to %d: %v %v", size, fi.Size(), err)
	}
}

// writeRandomFiles writes n files of size bytes named prefix0.. into
// fsys and records their contents in files.
func writeRandomFiles(t *testing.T, fsys *btrfs.FS, r *rand.Rand, prefix string, n, size int, files map[string][]byte) error {
	t.Helper()
	for i := range n {
		data := make([]byte, size)
		for j := range data {
			data[j] = byte(r.Uint32())
		}
		name := fmt.Sprintf("%s%d", prefix, i)
		if err := fsys.WriteFile(name, data, 0o644); err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
		files[name] = data
	}
	return nil
}

// kernelSees mounts img and compares its top directory's regular files
// with files.
func kernelSees(t *testing.T, img string, files map[string][]byte) {
	t.Helper()
	dir := btrfstest.Mount(t, "ro", img)
	got, err := btrfstest.Scan(dir)
	btrfstest.Unmount(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for p, e := range got.Entries {
		if filepath.Dir(p) == "." && e.SHA256 != "" {
			n++
		}
	}
	if n != len(files) {
		t.Errorf("the kernel shows %d files at the top, want %d", n, len(files))
	}
	for name, data := range files {
		sum := sha256.Sum256(data)
		if e := got.Entries[name]; e == nil || e.SHA256 != hex.EncodeToString(sum[:]) {
			t.Errorf("%s: the kernel shows %+v, want %d bytes with sha256 %x", name, e, len(data), sum)
		}
	}
}

// readAll reads every file of files from img and compares.
func sameFiles(t *testing.T, fsys *btrfs.FS, files map[string][]byte) {
	t.Helper()
	for name, data := range files {
		got, err := fsys.ReadFile(name)
		if err != nil || !bytes.Equal(got, data) {
			t.Errorf("%s: read %d bytes, %v; want %d bytes", name, len(got), err, len(data))
		}
	}
}

// TestResizeGrowShrunkImage makes an image with mkfs --shrink (ours),
// sees it full, grows it by extending the file and Resize, and writes
// more than fitted before; then the same on an image mkfs.btrfs made.
// After each: btrfs check clean, the sizes right, the superblock mirror
// at 64 MiB written now that it is inside the device, and the kernel
// sees every file.
func TestResizeGrowShrunkImage(t *testing.T) {
	btrfstest.RequireInterop(t)
	r := rand.New(rand.NewChaCha8([32]byte{18}))
	src := t.TempDir()
	files := map[string][]byte{}
	for i := range 4 {
		data := make([]byte, 300<<10)
		for j := range data {
			data[j] = byte(r.Uint32())
		}
		name := fmt.Sprintf("src%d", i)
		if err := os.WriteFile(filepath.Join(src, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
		files[name] = data
	}
	ours := filepath.Join(t.TempDir(), "shrunk.img")
	opener := func() (mkfs.Source, error) { return mkfs.OpenDir(src) }
	if _, err := mkfs.Build(ours, opener, mkfs.BuildOptions{Shrink: true, PrePass: true}); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(ours)
	if err != nil {
		t.Fatal(err)
	}
	small := uint64(fi.Size())
	t.Logf("mkfs --shrink made %d bytes", small)
	// Nearly full: count the 1 MiB files that still go in, each
	// committed, until one does not.
	fsys := openWritable(t, []string{ours})
	fitted := 0
	for ; ; fitted++ {
		one := map[string][]byte{}
		err := writeRandomFiles(t, fsys, r, fmt.Sprintf("fill%d-", fitted), 1, 1<<20, one)
		if err == nil {
			err = fsys.Commit()
		}
		if errors.Is(err, btrfs.ErrNoSpace) {
			break
		}
		if err != nil || fitted > 200 {
			t.Fatalf("filling the shrunk image: %d files, then %v", fitted, err)
		}
		maps.Copy(files, one)
	}
	fsys.Close()
	t.Logf("the shrunk image took %d more 1 MiB files", fitted)
	btrfstest.Check(t, []string{ours}, true)

	mkfsImg := mkfs62(t, btrfstest.MkfsOptions{Size: 48 << 20, MetadataProfile: "single"})
	for _, c := range []struct {
		name  string
		img   string
		files map[string][]byte
		size  uint64
	}{
		{"mkfs-shrink", ours, files, 200 << 20},
		{"mkfs.btrfs", mkfsImg, map[string][]byte{}, 200 << 20},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := resizeTo(t, c.img, c.size); err != nil {
				t.Fatal(err)
			}
			checkResized(t, c.img, c.size)
			assertMirror(t, c.img, 1)
			fsys := openWritable(t, []string{c.img})
			// Twice as many files as fitted before.
			if err := writeRandomFiles(t, fsys, r, "late", 2*fitted+10, 1<<20, c.files); err != nil {
				t.Fatal(err)
			}
			if err := fsys.Close(); err != nil {
				t.Fatal(err)
			}
			checkResized(t, c.img, c.size)
			kernelSees(t, c.img, c.files)
			// Growing by nothing changes nothing; growing a resized
			// image again goes on from its size.
			if err := resizeTo(t, c.img, c.size+(64<<20)); err != nil {
				t.Fatal(err)
			}
			checkResized(t, c.img, c.size+(64<<20))
			kernelSees(t, c.img, c.files)
		})
	}
}

// assertMirror checks that superblock copy i is a btrfs superblock of the
// same generation as the primary.
func assertMirror(t *testing.T, img string, i int) {
	t.Helper()
	f, err := os.Open(img)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	read := func(off int64) []byte {
		b := make([]byte, 4096)
		if _, err := f.ReadAt(b, off); err != nil {
			t.Fatalf("superblock at %d: %v", off, err)
		}
		return b
	}
	primary, mirror := read(64<<10), read(int64(64<<20)<<(12*(i-1)))
	if string(mirror[0x40:0x48]) != "_BHRfS_M" || !bytes.Equal(primary[0x48:0x50], mirror[0x48:0x50]) {
		t.Errorf("superblock mirror %d: magic %q generation %x, primary's %x", i, mirror[0x40:0x48], mirror[0x48:0x50], primary[0x48:0x50])
	}
}

// extentAddrs returns the disk address of every extent of the files.
func extentAddrs(t *testing.T, fsys *btrfs.FS, files map[string][]byte) map[string]uint64 {
	t.Helper()
	out := map[string]uint64{}
	for name := range files {
		exts, err := fsys.FileExtents(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range exts {
			out[fmt.Sprintf("%s@%d", name, e.Offset)] = e.DiskAddr
		}
	}
	return out
}

// blockGroupStarts returns the starts of the block groups of type typ.
func blockGroupStarts(t *testing.T, img, typ string) []uint64 {
	t.Helper()
	fsys, err := btrfs.Open(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	info, err := fsys.Info()
	if err != nil {
		t.Fatal(err)
	}
	var out []uint64
	for _, g := range info.BlockGroups {
		if g.Type == typ {
			out = append(out, g.Start)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// TestResizeShrinkMovesData fills an image with data over several
// chunks, deletes every other file, and shrinks it 32 MiB at a time
// until what is used no longer fits: each shrink moves the data of the
// chunks past the new end (the files' extents change address), btrfs
// check is clean and the files read back the same; the shrink that
// cannot fit is refused up front with ErrNoSpace and leaves the image
// file as it was. The kernel sees every file at the end.
func TestResizeShrinkMovesData(t *testing.T) {
	btrfstest.RequireInterop(t)
	r := rand.New(rand.NewChaCha8([32]byte{19}))
	img := mkfsOurs(t, mkfs.Options{Size: 320 << 20})
	files := map[string][]byte{}
	fsys := openWritable(t, []string{img})
	for round := range 3 {
		if err := writeRandomFiles(t, fsys, r, fmt.Sprintf("r%d-", round), 10, 3<<20, files); err != nil {
			t.Fatal(err)
		}
		if err := fsys.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	k := 0
	for _, name := range sortedNames(files) {
		if k++; k%2 == 0 {
			if err := fsys.Remove(name); err != nil {
				t.Fatal(err)
			}
			delete(files, name)
		}
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	const step = 32 << 20
	size := uint64(320 << 20)
	moved := 0
	for {
		fsys := openWritable(t, []string{img})
		before := extentAddrs(t, fsys, files)
		fsys.Close()
		sum := imageSum(t, img)
		err := resizeTo(t, img, size-step)
		if errors.Is(err, btrfs.ErrNoSpace) {
			t.Logf("shrinking to %d MiB refused: %v", (size-step)>>20, err)
			if imageSum(t, img) != sum {
				// Refused after moving began: the data it copied went
				// to free space, the last commit must be whole.
				t.Log("the refused shrink wrote to free space")
				btrfstest.Check(t, []string{img}, true)
			}
			checkResized(t, img, size)
			break
		}
		if err != nil {
			t.Fatalf("shrink to %d: %v", size-step, err)
		}
		size -= step
		checkResized(t, img, size)
		fsys = openWritable(t, []string{img})
		after := extentAddrs(t, fsys, files)
		for k, a := range before {
			if after[k] != a {
				moved++
			}
		}
		sameFiles(t, fsys, files)
		fsys.Close()
	}
	t.Logf("shrunk to %d MiB, %d extents moved on the way", size>>20, moved)
	if moved == 0 || size > 160<<20 {
		t.Errorf("shrunk to %d MiB moving %d extents: want data moved and at most 160 MiB", size>>20, moved)
	}
	kernelSees(t, img, files)
}

// imageSum is the sha256 of a file's bytes.
func imageSum(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// TestResizeShrinkMovesMetadata grows a small image, fills it with data
// and then with xattr-laden files until a second metadata chunk is made
// past the data, deletes the data, and shrinks back to the first size:
// the metadata chunk past the end is emptied by copying its tree blocks
// on write and removed, with the data chunks, and btrfs check and the
// kernel agree with what was written.
func TestResizeShrinkMovesMetadata(t *testing.T) {
	btrfstest.RequireInterop(t)
	r := rand.New(rand.NewChaCha8([32]byte{20}))
	img := mkfsOurs(t, mkfs.Options{Size: 128 << 20, MetadataProfile: "single", NodeSize: 4096})
	if err := resizeTo(t, img, 512<<20); err != nil {
		t.Fatal(err)
	}
	checkResized(t, img, 512<<20)
	fsys := openWritable(t, []string{img})
	big := map[string][]byte{}
	if err := writeRandomFiles(t, fsys, r, "big", 8, 16<<20, big); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Commit(); err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	xv := bytes.Repeat([]byte("x"), 3000)
	for i := 0; len(blockGroupStartsOf(t, fsys, "METADATA")) < 2; i++ {
		if i > 4000 {
			t.Fatal("no second metadata chunk after 4000 files")
		}
		name := fmt.Sprintf("small%d", i)
		data := []byte(fmt.Sprintf("small file %d\n", i))
		if err := fsys.WriteFile(name, data, 0o644); err != nil {
			t.Fatal(err)
		}
		files[name] = data
		if err := fsys.Setxattr(name, "user.pad", xv); err != nil {
			t.Fatal(err)
		}
		if i%200 == 199 {
			if err := fsys.Commit(); err != nil {
				t.Fatal(err)
			}
		}
	}
	for name := range big {
		if err := fsys.Remove(name); err != nil {
			t.Fatal(err)
		}
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	meta := blockGroupStarts(t, img, "METADATA")
	if err := resizeTo(t, img, 128<<20); err != nil {
		t.Fatal(err)
	}
	checkResized(t, img, 128<<20)
	after := blockGroupStarts(t, img, "METADATA")
	t.Logf("metadata block groups %v, after the shrink %v", meta, after)
	if len(after) == 0 || after[len(after)-1] == meta[len(meta)-1] {
		t.Errorf("the last metadata block group %d did not move: %v", meta[len(meta)-1], after)
	}
	fsys = openWritable(t, []string{img})
	sameFiles(t, fsys, files)
	x, err := fsys.Getxattr("small7", "user.pad")
	if err != nil || !bytes.Equal(x, xv) {
		t.Errorf("xattr after the shrink: %d bytes, %v", len(x), err)
	}
	fsys.Close()
	kernelSees(t, img, files)
}

// blockGroupStartsOf is blockGroupStarts of an open filesystem's last
// commit.
func blockGroupStartsOf(t *testing.T, fsys *btrfs.FS, typ string) []uint64 {
	t.Helper()
	info, err := fsys.Info()
	if err != nil {
		t.Fatal(err)
	}
	var out []uint64
	for _, g := range info.BlockGroups {
		if g.Type == typ {
			out = append(out, g.Start)
		}
	}
	return out
}

// TestResizeShrinkPowerLoss cuts the power during a shrink that moves
// data (at every sync and superblock write and a sample of the other
// writes, as TestCrashDuringDataOps): every crash image opens, passes
// btrfs check --check-data-csum, holds the same files, and is either the
// old size with the old layout or the new one.
func TestResizeShrinkPowerLoss(t *testing.T) {
	btrfstest.RequireInterop(t)
	rng := rand.New(rand.NewPCG(18, 6))
	img0 := btrfstest.Mkfs(t, btrfstest.MkfsOptions{Size: 128 << 20, NodeSize: 4096})
	files := map[string][]byte{}
	fsys := openWritable(t, []string{img0})
	if err := writeRandomFiles(t, fsys, rng, "f", 20, 1<<20, files); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Commit(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i += 2 {
		name := fmt.Sprintf("f%d", i)
		if err := fsys.Remove(name); err != nil {
			t.Fatal(err)
		}
		delete(files, name)
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	// The smallest size a shrink reaches, found on a copy, moving data.
	const old = 128 << 20
	rfs, err := btrfs.Open(img0, nil)
	if err != nil {
		t.Fatal(err)
	}
	addrs := extentAddrs(t, rfs, files)
	rfs.Close()
	target := uint64(0)
	for size := uint64(old - 8<<20); size > 32<<20; size -= 8 << 20 {
		scratch := filepath.Join(t.TempDir(), "scratch.img")
		b, err := os.ReadFile(img0)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(scratch, b, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := resizeTo(t, scratch, size); err != nil {
			break
		}
		target = size
	}
	if target == 0 {
		t.Fatal("no shrink succeeded")
	}
	t.Logf("shrinking %d MiB to %d MiB", old>>20, target>>20)
	base := readImage(t, img0)
	ops := []dataOp{{desc: fmt.Sprintf("resize to %d", target), do: func(fsys *btrfs.FS) error {
		_, err := fsys.Resize(1, target)
		return err
	}}}
	work := filepath.Join(t.TempDir(), "work.img")
	check := filepath.Join(t.TempDir(), "crash.img")
	sizeOf := func(what string) uint64 {
		f, err := btrfs.Open(check, nil)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		defer f.Close()
		info, err := f.Info()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if info.TotalBytes != old && info.TotalBytes != target || info.Devices[0].TotalBytes != info.TotalBytes {
			t.Fatalf("%s: total_bytes %d, device %d; want %d or %d", what, info.TotalBytes, info.Devices[0].TotalBytes, old, target)
		}
		sameFiles(t, f, files)
		return info.TotalBytes
	}
	ref := runWithLoss(t, base, work, nil, nil, ops, lossPoint{}, false, rng)
	if ref.err != nil {
		t.Fatalf("shrink without a power loss: %v", ref.err)
	}
	crashState(t, ref, check, files, files, "no loss")
	if got := sizeOf("no loss"); got != target {
		t.Fatalf("shrink without a power loss left %d bytes", got)
	}
	rfs, err = btrfs.Open(check, nil)
	if err != nil {
		t.Fatal(err)
	}
	moved := 0
	for k, a := range extentAddrs(t, rfs, files) {
		if addrs[k] != a {
			moved++
		}
	}
	rfs.Close()
	if moved == 0 {
		t.Fatal("the shrink moved no data extent")
	}
	pts := dataLossPoints(ref.ops, rng, longTests())
	t.Logf("the shrink made %d writes, %d syncs; trying %d loss points",
		ref.count[blockdev.OpWrite], ref.count[blockdev.OpSync], len(pts))
	sizes := map[uint64]int{}
	for i, lp := range pts {
		torn := i%2 == 1
		run := runWithLoss(t, base, work, nil, nil, ops, lp, torn, rng)
		what := fmt.Sprintf("loss at %s %d (torn %v)", lp.op, lp.n, torn)
		if !run.lost {
			t.Fatalf("%s: the loss point was not reached", what)
		}
		if run.err == nil {
			t.Fatalf("%s: the shrink succeeded although the power was lost", what)
		}
		crashState(t, run, check, files, files, what)
		sizes[sizeOf(what)]++
	}
	t.Logf("after the losses: %d times the old size, %d times the new", sizes[old], sizes[target])
	if sizes[old] == 0 {
		t.Error("no power loss left the old size")
	}
}

// TestResizeGrowMultiDevice grows the second device of a two-device
// filesystem (DEVID 2): its device item and superblock copy, and the
// filesystem's total, take the new size; data fills the new room (raid1
// metadata needs both devices, single data goes where there is room);
// btrfs check and the kernel agree (shrinking: TestResizeShrinkMultiDevice).
func TestResizeGrowMultiDevice(t *testing.T) {
	btrfstest.RequireInterop(t)
	r := rand.New(rand.NewChaCha8([32]byte{21}))
	devs := btrfstest.MkfsMulti(t, btrfstest.MkfsOptions{Size: 80 << 20, DataProfile: "single", MetadataProfile: "raid1"})
	if err := os.Truncate(devs[1], 256<<20); err != nil {
		t.Fatal(err)
	}
	fsys := openWritable(t, devs)
	old, err := fsys.Resize(2, 256<<20)
	if err != nil || old != 80<<20 {
		t.Fatalf("resize device 2: was %d, %v", old, err)
	}
	if _, err := fsys.Resize(3, 64<<20); err == nil {
		t.Error("resizing device 3 of two succeeded")
	}
	files := map[string][]byte{}
	// More than the two 80 MiB devices could hold.
	if err := writeRandomFiles(t, fsys, r, "f", 60, 3<<20, files); err != nil {
		t.Fatal(err)
	}
	info, err := fsys.Info()
	if err != nil {
		t.Fatal(err)
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	if info.TotalBytes != 336<<20 || info.Devices[1].TotalBytes != 256<<20 || info.Devices[0].TotalBytes != 80<<20 {
		t.Errorf("after growing device 2: total %d, devices %+v", info.TotalBytes, info.Devices)
	}
	btrfstest.Check(t, devs, true)
	dir := btrfstest.Mount(t, "ro", devs...)
	got, err := btrfstest.Scan(dir)
	btrfstest.Unmount(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range files {
		sum := sha256.Sum256(data)
		if e := got.Entries[name]; e == nil || e.SHA256 != hex.EncodeToString(sum[:]) {
			t.Errorf("%s: the kernel shows %+v", name, e)
		}
	}
}

// TestResizeShrinkRefusesSnapshots shrinks a filesystem where the kernel
// snapshotted the top subvolume, past a chunk in use: refused up front
// (ErrUnsupported, naming snapshots), the image file untouched.
func TestResizeShrinkRefusesSnapshots(t *testing.T) {
	btrfstest.RequireInterop(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{Size: 256 << 20})
	dir := btrfstest.Mount(t, "", img)
	r := rand.New(rand.NewChaCha8([32]byte{22}))
	for i := range 20 {
		data := make([]byte, 3<<20)
		for j := range data {
			data[j] = byte(r.Uint32())
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%d", i)), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := exec.Command("btrfs", "subvolume", "snapshot", dir, filepath.Join(dir, "snap")).CombinedOutput(); err != nil {
		t.Fatalf("snapshot: %v\n%s", err, out)
	}
	btrfstest.Unmount(t, dir)
	sum := imageSum(t, img)
	err := resizeTo(t, img, 64<<20)
	if !errors.Is(err, btrfs.ErrUnsupported) || !strings.Contains(err.Error(), "snapshot") {
		t.Fatalf("shrinking a snapshotted filesystem: %v, want ErrUnsupported naming snapshots", err)
	}
	if imageSum(t, img) != sum {
		t.Error("the refused shrink changed the image file")
	}
	btrfstest.Check(t, []string{img}, true)
}

// kernelTree is the kernel's view of img (mounted read-only).
func kernelTree(t *testing.T, img string) *btrfstest.Tree {
	t.Helper()
	dir := btrfstest.Mount(t, "ro", img)
	defer btrfstest.Unmount(t, dir)
	tree, err := btrfstest.Scan(dir)
	if err != nil {
		t.Fatal(err)
	}
	return tree
}

// TestResizeShrinkMovesEveryKind shrinks, moving them, files of every
// kind a data extent serves: compressed, cloned within and between files
// (one extent, several file extent items and references), partly
// overwritten (an extent referenced in part), preallocated, sparse, in a
// second subvolume, with xattrs, hard links; on mkfs.btrfs 6.2's defaults
// and on our mkfs's 4 KiB-node xxhash image with DUP data (and the
// block-group tree). The kernel's view before
// and after each shrink is the same, btrfs check clean.
func TestResizeShrinkMovesEveryKind(t *testing.T) {
	btrfstest.RequireInterop(t)
	for _, c := range []struct {
		name string
		mk   func(t *testing.T) string
	}{
		{"mkfs.btrfs-defaults", func(t *testing.T) string { return mkfs62(t, btrfstest.MkfsOptions{Size: 256 << 20}) }},
		{"ours-4k-xxhash-dupdata", func(t *testing.T) string {
			return mkfsOurs(t, mkfs.Options{Size: 256 << 20, NodeSize: 4096, Csum: btrfs.CsumXXHash, DataProfile: "dup", MetadataProfile: "dup"})
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := rand.New(rand.NewChaCha8([32]byte{23}))
			img := c.mk(t)
			fsys, err := btrfs.OpenWritable(img, &btrfs.Options{Compress: "zstd"})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { fsys.Close() })
			filler := map[string][]byte{}
			if err := writeRandomFiles(t, fsys, r, "filler", 12, 3<<20, filler); err != nil {
				t.Fatal(err)
			}
			if err := fsys.Commit(); err != nil {
				t.Fatal(err)
			}
			rnd := make([]byte, 2<<20)
			for i := range rnd {
				rnd[i] = byte(r.Uint32())
			}
			text := bytes.Repeat([]byte("compressible text "), 100000)
			if _, err := fsys.CreateSubvolume("sv", nil); err != nil {
				t.Fatal(err)
			}
			for _, step := range []error{
				fsys.Mkdir("d", 0o755),
				fsys.WriteFile("d/random", rnd, 0o644),
				fsys.WriteFile("d/text", text, 0o644),
				fsys.WriteFile("small", []byte("inline\n"), 0o644),
				fsys.WriteFile("sv/in-subvolume", rnd[:700<<10], 0o644),
				fsys.CreateEmpty("clone", 0o644),
				fsys.Clone("d/random", 128<<10, "clone", 0, 256<<10),
				fsys.Clone("d/random", 0, "clone", 1<<20, 512<<10),
				fsys.Link("d/text", "hardlink"),
				fsys.CreateEmpty("prealloc", 0o644),
				fsys.Fallocate("prealloc", 0, 256<<10, false),
				fsys.CreateEmpty("sparse", 0o644),
				fsys.Setxattr("d/random", "user.note", []byte("moved with it")),
			} {
				if step != nil {
					t.Fatal(step)
				}
			}
			if _, err := fsys.WriteAt("sparse", rnd[:8192], 3<<20); err != nil {
				t.Fatal(err)
			}
			if _, err := fsys.WriteAt("d/random", rnd[:64<<10], 512<<10); err != nil {
				t.Fatal(err)
			}
			if err := fsys.Commit(); err != nil {
				t.Fatal(err)
			}
			for name := range filler {
				if err := fsys.Remove(name); err != nil {
					t.Fatal(err)
				}
			}
			if err := fsys.Close(); err != nil {
				t.Fatal(err)
			}
			want := kernelTree(t, img)
			size := uint64(256 << 20)
			for size > 32<<20 {
				next := size - 32<<20
				err := resizeTo(t, img, next)
				if errors.Is(err, btrfs.ErrNoSpace) {
					break
				}
				if err != nil {
					t.Fatalf("shrink to %d: %v", next, err)
				}
				size = next
				checkResized(t, img, size)
				if d := btrfstest.Diff(want, kernelTree(t, img), btrfstest.DiffOptions{CompareNlink: true}); len(d) > 0 {
					t.Fatalf("after shrinking to %d MiB the kernel shows:\n%s", size>>20, strings.Join(d, "\n"))
				}
			}
			t.Logf("shrunk to %d MiB", size>>20)
			if size > 128<<20 {
				t.Errorf("shrunk only to %d MiB", size>>20)
			}
		})
	}
}

// TestResizeShrinkCutsAcrossChunk shrinks into the middle of a large data
// chunk the kernel filled: only the extents past the new end move (to the
// chunk's own free part and the others), and the chunk is cut there; moving
// the whole chunk, as the kernel's balance does, would not fit. The
// kernel's view is unchanged, btrfs check clean.
func TestResizeShrinkCutsAcrossChunk(t *testing.T) {
	btrfstest.RequireInterop(t)
	img := mkfs62(t, btrfstest.MkfsOptions{Size: 1 << 30})
	dir := btrfstest.Mount(t, "", img)
	r := rand.New(rand.NewChaCha8([32]byte{24}))
	for i := range 40 {
		data := make([]byte, 3<<20)
		for j := range data {
			data[j] = byte(r.Uint32())
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%02d", i)), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	btrfstest.Unmount(t, dir)
	dir = btrfstest.Mount(t, "", img)
	for i := range 30 {
		if err := os.Remove(filepath.Join(dir, fmt.Sprintf("f%02d", i))); err != nil {
			t.Fatal(err)
		}
	}
	btrfstest.Unmount(t, dir)
	want := kernelTree(t, img)
	groups := func() map[uint64]uint64 {
		fsys, err := btrfs.Open(img, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer fsys.Close()
		info, err := fsys.Info()
		if err != nil {
			t.Fatal(err)
		}
		out := map[uint64]uint64{}
		for _, g := range info.BlockGroups {
			if g.Type == "DATA" {
				out[g.Start] = g.Length
			}
		}
		return out
	}
	before := groups()
	if err := resizeTo(t, img, 200<<20); err != nil {
		t.Fatal(err)
	}
	checkResized(t, img, 200<<20)
	after := groups()
	cut := false
	for start, length := range after {
		if old, ok := before[start]; ok && length < old {
			cut = true
		}
	}
	if !cut {
		t.Errorf("no data block group was cut: before %v, after %v", before, after)
	}
	if d := btrfstest.Diff(want, kernelTree(t, img), btrfstest.DiffOptions{CompareNlink: true}); len(d) > 0 {
		t.Fatalf("after the shrink the kernel shows:\n%s", strings.Join(d, "\n"))
	}
}
