//go:build linux

package chunk_test

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gobtrfs/btrfs/internal/blockdev"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
	"github.com/gobtrfs/btrfs/internal/chunk"
	"github.com/gobtrfs/btrfs/internal/disk"
)

// run runs a command and returns its output, failing the test on error.
func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// kernelFS is a filesystem made by mkfs.btrfs on loop devices over sparse
// image files in a test directory.
type kernelFS struct {
	imgs  []string
	loops []string
	mnt   string
}

// newKernelFS makes the images, attaches them and runs mkfs. Cleanup
// unmounts, detaches, and checks that no loop device is left on the images.
func newKernelFS(t *testing.T, n int, mkfsArgs ...string) *kernelFS {
	dir := t.TempDir()
	k := &kernelFS{mnt: filepath.Join(dir, "mnt")}
	if err := os.Mkdir(k.mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, img := range k.imgs {
			if out, _ := exec.Command("losetup", "-j", img).CombinedOutput(); len(bytes.TrimSpace(out)) != 0 {
				t.Errorf("loop device left on %s: %s", img, out)
			}
		}
	})
	for i := range n {
		img := filepath.Join(dir, fmt.Sprintf("dev%d.img", i))
		if err := os.WriteFile(img, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(img, 256<<20); err != nil {
			t.Fatal(err)
		}
		k.imgs = append(k.imgs, img)
		loop := strings.TrimSpace(run(t, "losetup", "--find", "--show", img))
		k.loops = append(k.loops, loop)
		t.Cleanup(func() {
			if out, err := exec.Command("losetup", "-d", loop).CombinedOutput(); err != nil {
				t.Errorf("losetup -d %s: %v %s", loop, err, out)
			}
		})
	}
	run(t, "mkfs.btrfs", append(append([]string{"-f", "-K"}, mkfsArgs...), k.loops...)...)
	return k
}

// writeFile mounts the filesystem, writes data to /f, syncs and unmounts.
func (k *kernelFS) writeFile(t *testing.T, data []byte) {
	run(t, "mount", k.loops[0], k.mnt)
	mounted := true
	t.Cleanup(func() {
		if mounted {
			exec.Command("umount", k.mnt).Run()
		}
	})
	f, err := os.Create(filepath.Join(k.mnt, "f"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	run(t, "umount", k.mnt)
	mounted = false
}

// fileExtent is one regular extent of the test file.
type fileExtent struct {
	fileOff uint64
	logical disk.LogicalAddr // disk bytenr + extent offset
	length  uint64
}

var (
	reExtentKey  = regexp.MustCompile(`key \(257 EXTENT_DATA (\d+)\)`)
	reDiskByte   = regexp.MustCompile(`extent data disk byte (\d+) nr (\d+)`)
	reDataOffset = regexp.MustCompile(`extent data offset (\d+) nr (\d+) ram (\d+)`)
	reCompress   = regexp.MustCompile(`extent compression (\d+)`)
)

// extents parses the file's extents from dump-tree of the fs tree.
func (k *kernelFS) extents(t *testing.T) []fileExtent {
	out := run(t, "btrfs", "inspect-internal", "dump-tree", "-t", "5", k.loops[0])
	var exts []fileExtent
	var cur *fileExtent
	num := func(s string) uint64 {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, line := range strings.Split(out, "\n") {
		if m := reExtentKey.FindStringSubmatch(line); m != nil {
			exts = append(exts, fileExtent{fileOff: num(m[1])})
			cur = &exts[len(exts)-1]
		} else if cur == nil {
			continue
		} else if m := reDiskByte.FindStringSubmatch(line); m != nil {
			cur.logical = disk.LogicalAddr(num(m[1]))
		} else if m := reDataOffset.FindStringSubmatch(line); m != nil {
			cur.logical += disk.LogicalAddr(num(m[1]))
			cur.length = num(m[2])
		} else if m := reCompress.FindStringSubmatch(line); m != nil && m[1] != "0" {
			t.Fatalf("compressed extent in the test file: %s", line)
		}
	}
	if len(exts) == 0 || exts[0].logical == 0 {
		t.Fatalf("no regular extent for inode 257 in dump-tree output:\n%s", out)
	}
	return exts
}

// loadMap builds the chunk map the way a mounting reader must: scan the
// device images, bootstrap from the sys_chunk_array, then read the chunk
// tree through that map (verifying checksums) and add its CHUNK_ITEMs. It
// returns the map, the device set and the devids of the DEV_ITEMs.
func loadMap(t *testing.T, paths []string) (*chunk.Map, *blockdev.Set, []disk.DevID) {
	set, err := blockdev.Scan(paths)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { set.Close() })
	sb := set.Super
	m, err := chunk.NewMapFromSuper(sb)
	if err != nil {
		t.Fatal(err)
	}
	r := chunk.NewReader(m, set.Devices())
	var devids []disk.DevID
	var walk func(addr disk.LogicalAddr, depth int)
	walk = func(addr disk.LogicalAddr, depth int) {
		if depth > 8 {
			t.Fatal("chunk tree too deep")
		}
		blk := make([]byte, sb.NodeSize)
		err := r.ReadBlock(blk, addr, func(b []byte) bool {
			return sb.CsumType.VerifyBlock(b) && disk.Node(b).Bytenr() == addr
		})
		if err != nil {
			t.Fatalf("chunk tree block %d: %v", addr, err)
		}
		node := disk.Node(blk)
		for i := range node.NumItems() {
			if !node.IsLeaf() {
				walk(node.KeyPtr(i).BlockPtr, depth+1)
				continue
			}
			key := node.Key(i)
			switch key.Type {
			case disk.ChunkItemKey:
				var it disk.ChunkItem
				if err := it.Decode(node.ItemData(i)); err != nil {
					t.Fatal(err)
				}
				if err := m.Add(disk.LogicalAddr(key.Offset), &it); err != nil {
					t.Fatal(err)
				}
			case disk.DevItemKey:
				devids = append(devids, disk.DevID(key.Offset))
			}
		}
	}
	walk(sb.ChunkRoot, 0)
	return m, set, devids
}

// readFile reads every extent of the file through r and compares it with
// want; it returns the pieces traced.
func readFile(t *testing.T, r *chunk.Reader, exts []fileExtent, want []byte) []chunk.Piece {
	t.Helper()
	var pieces []chunk.Piece
	for _, e := range exts {
		end := min(e.fileOff+e.length, uint64(len(want)))
		expect := want[e.fileOff:end]
		got := make([]byte, e.length)
		verify := func(l disk.LogicalAddr, b []byte) bool {
			off := uint64(l - e.logical)
			for i := range b {
				if off+uint64(i) < uint64(len(expect)) && b[i] != expect[off+uint64(i)] {
					return false
				}
			}
			return true
		}
		if err := r.ReadLogicalTrace(got, e.logical, verify, func(p chunk.Piece) { pieces = append(pieces, p) }); err != nil {
			t.Fatalf("extent at file offset %d (logical %d): %v", e.fileOff, e.logical, err)
		}
		if !bytes.Equal(got[:len(expect)], expect) {
			t.Fatalf("extent at file offset %d (logical %d) differs", e.fileOff, e.logical)
		}
	}
	return pieces
}

// TestInteropKernelImages makes multi-device filesystems with mkfs.btrfs,
// writes a file through the kernel, and reads it back through our map
// and reader: healthy, with devices removed, and with a copy corrupted.
func TestInteropKernelImages(t *testing.T) {
	btrfstest.RequireInterop(t)
	if testing.Short() {
		t.Skip("short mode")
	}
	for _, tc := range []struct {
		profile string
		n       int
		drops   [][]int // sets of data-chunk stripe indexes whose devices are removed
	}{
		{"raid0", 2, nil},
		{"raid1", 2, [][]int{{0}, {1}}},
		{"raid10", 4, [][]int{{0}, {3}, {0, 2}, {1, 3}}},
		{"raid5", 3, [][]int{{0}, {1}, {2}}},
		{"raid6", 4, [][]int{{0}, {0, 1}, {1, 3}, {2, 3}}},
		{"raid1c3", 3, [][]int{{0, 1}, {2}}},
	} {
		t.Run(tc.profile, func(t *testing.T) {
			interopProfile(t, tc.profile, tc.n, tc.drops)
		})
	}
}

func interopProfile(t *testing.T, profile string, n int, drops [][]int) {
	rng := newRand(t)
	data := make([]byte, 5<<20+12345)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	k := newKernelFS(t, n, "-d", profile, "-m", "raid1")
	k.writeFile(t, data)
	exts := k.extents(t)

	m, set, devids := loadMap(t, k.imgs)
	if missing := set.Missing(devids); len(missing) != 0 || len(devids) != n {
		t.Fatalf("dev items %v, missing %v", devids, missing)
	}
	r := chunk.NewReader(m, set.Devices())
	for _, p := range readFile(t, r, exts, data) {
		if p.Mirror != 1 {
			t.Fatalf("healthy read used %+v", p)
		}
	}
	c, err := m.Lookup(exts[0].logical)
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := chunk.ProfileOf(c.Type()); p.String() != profile || c.Type()&disk.BlockGroupData == 0 {
		t.Fatalf("file in %v", c)
	}
	for _, drop := range drops {
		var ids []disk.DevID
		for _, k := range drop {
			ids = append(ids, c.Stripe(k).DevID)
		}
		devs := set.Devices()
		for _, id := range ids {
			delete(devs, id)
		}
		pieces := readFile(t, chunk.NewReader(m, devs), exts, data)
		// Mirrored profiles read stripe 0 first (RAID10: 0 or 2); data
		// columns rotate over every device of a RAID5/6 chunk.
		first := slices.Contains(drop, 0) || (profile == "raid10" && slices.Contains(drop, 2))
		needed := first || profile == "raid5" || profile == "raid6"
		if needed != slices.ContainsFunc(pieces, func(p chunk.Piece) bool { return p.Mirror > 1 }) {
			t.Fatalf("without devids %v: pieces from other copies: %v, expected %v", ids, !needed, needed)
		}
		if len(drop) == 1 {
			interopRescan(t, k, set, ids[0], exts, data)
		}
	}
	if len(drops) > 0 {
		interopCorrupt(t, m, set, exts, data, rng)
	}
}

// interopRescan scans only the remaining images, rebuilds the map from
// them (the metadata is RAID1, so the chunk tree survives one loss) and
// reads the file again.
func interopRescan(t *testing.T, k *kernelFS, set *blockdev.Set, gone disk.DevID, exts []fileExtent, data []byte) {
	var paths []string
	for _, img := range k.imgs {
		if img != set.Members[gone].Path {
			paths = append(paths, img)
		}
	}
	m, set2, devids := loadMap(t, paths)
	if missing := set2.Missing(devids); !slices.Equal(missing, []disk.DevID{gone}) {
		t.Fatalf("missing %v, want [%d]", missing, gone)
	}
	readFile(t, chunk.NewReader(m, set2.Devices()), exts, data)
}

// interopCorrupt overwrites 4 KiB of the first copy of a few random
// sectors in the image files and checks that verification finds the good
// data elsewhere. Only survivable damage is made (see survivable).
func interopCorrupt(t *testing.T, m *chunk.Map, set *blockdev.Set, exts []fileExtent, data []byte, rng *rand.Rand) {
	e := exts[0]
	var hit []disk.LogicalAddr
	damaged := map[rowSector][]int{}
	for draws := 0; len(hit) < 8; draws++ {
		if draws == 1000 {
			t.Fatalf("no survivable damage found in %d draws (hits %v)", draws, hit)
		}
		l := e.logical + disk.LogicalAddr(rng.Uint64N(e.length/4096)*4096)
		mp, err := m.Mirrors(l, 4096)
		if err != nil {
			t.Fatal(err)
		}
		if !survivable(damaged, mp) {
			continue
		}
		spoil(t, set, mp.Copies[0])
		hit = append(hit, l)
	}
	set2, err := blockdev.Scan(pathsOf(set))
	if err != nil {
		t.Fatal(err)
	}
	defer set2.Close()
	pieces := readFile(t, chunk.NewReader(m, set2.Devices()), exts, data)
	repaired := 0
	for _, p := range pieces {
		if p.Mirror > 1 && slices.ContainsFunc(hit, func(l disk.LogicalAddr) bool {
			return l >= p.Logical && l < p.Logical+disk.LogicalAddr(p.Length)
		}) {
			repaired++
		}
	}
	if repaired == 0 {
		t.Fatalf("corrupted sectors %v were read without falling back", hit)
	}
	if mp, _ := m.Mirrors(hit[0], 4096); mp.Chunk.Profile().Parity() > 0 {
		interopBeyondRepair(t, m, set, e, data, mp)
	}
}

// spoil overwrites the 4 KiB at loc in its image file with junk.
func spoil(t *testing.T, set *blockdev.Set, loc chunk.Location) {
	f, err := os.OpenFile(set.Members[loc.DevID].Path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(bytes.Repeat([]byte{0x5a}, 4096), int64(loc.Physical)); err != nil {
		t.Fatal(err)
	}
}

// interopBeyondRepair damages, at the offset of the already damaged data
// sector mp, as many more places of its row as there are parity stripes
// (other data columns first, then P), so that the sector is truly lost,
// and checks that reading it fails with a ReadError instead of returning
// wrong bytes.
func interopBeyondRepair(t *testing.T, m *chunk.Map, set *blockdev.Set, e fileExtent, data []byte, mp *chunk.Mapping) {
	var more []chunk.Location
	for j, loc := range mp.Data {
		if j != mp.Column {
			more = append(more, loc)
		}
	}
	more = append(more, mp.P)[:mp.Chunk.Profile().Parity()]
	for _, loc := range more {
		spoil(t, set, loc)
	}
	set2, err := blockdev.Scan(pathsOf(set))
	if err != nil {
		t.Fatal(err)
	}
	defer set2.Close()
	off := e.fileOff + uint64(mp.Logical-e.logical)
	want := data[off:min(off+4096, uint64(len(data)))]
	got := make([]byte, 4096)
	err = chunk.NewReader(m, set2.Devices()).ReadLogical(got, mp.Logical, func(_ disk.LogicalAddr, b []byte) bool {
		return bytes.Equal(b[:len(want)], want)
	})
	var re *chunk.ReadError
	if !errors.As(err, &re) || re.Logical != mp.Logical || !errors.Is(err, chunk.ErrVerify) {
		t.Fatalf("sector %d damaged beyond parity (also at %v): %v, want a ReadError", mp.Logical, more, err)
	}
}

// rowSector names one sector offset of one full-stripe row of a RAID5/6
// chunk: the bytes that one P (and Q) sector protects.
type rowSector struct {
	row uint64
	in  uint64 // offset within the stripe element
}

// survivable reports whether the first copy of mp can be damaged on top of
// the damage already recorded in damaged, and records it if so. Mirrored
// profiles keep a good copy whatever is hit, since only the first copy is
// damaged. A RAID5/6 piece's first copy is its data column, and P (and Q)
// rebuild at most Parity() damaged columns at one offset of a row: a RAID5
// pick landing at the same offset of another column of an already damaged
// row would destroy that sector for real (the kernel's scrub then reports
// the full stripe uncorrectable and reads of it fail with EIO), so it is
// refused.
func survivable(damaged map[rowSector][]int, mp *chunk.Mapping) bool {
	par := mp.Chunk.Profile().Parity()
	if par == 0 {
		return true
	}
	key := rowSector{row: mp.Row, in: uint64(mp.Logical-mp.Chunk.Logical()) % S}
	cols := damaged[key]
	if slices.Contains(cols, mp.Column) {
		return true
	}
	if len(cols) >= par {
		return false
	}
	damaged[key] = append(cols, mp.Column)
	return true
}

func pathsOf(set *blockdev.Set) []string {
	var out []string
	for _, id := range set.DevIDs() {
		out = append(out, set.Members[id].Path)
	}
	return out
}
