package btrfs_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/blockdev"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// multiSum is the sha256 of every device file of a set, in order.
func multiSum(t *testing.T, devs []string) string {
	t.Helper()
	var all []string
	for _, d := range devs {
		all = append(all, imageSum(t, d))
	}
	return strings.Join(all, ",")
}

// resizeMulti resizes device devid of the set devs to size, as the
// command does (shrinking truncates that device's file).
func resizeMulti(t *testing.T, devs []string, devid, size uint64) error {
	t.Helper()
	fsys, err := btrfs.OpenWritable(devs[0], &btrfs.Options{Devices: devs[1:]})
	if err != nil {
		t.Fatal(err)
	}
	_, rerr := fsys.Resize(devid, size)
	if err := fsys.Close(); err != nil && rerr == nil {
		rerr = err
	}
	return rerr
}

// kernelSeesMulti mounts the set and compares its top directory's
// regular files with files.
func kernelSeesMulti(t *testing.T, devs []string, files map[string][]byte) {
	t.Helper()
	dir := btrfstest.Mount(t, "ro", devs...)
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

// keepOnFailure copies the device files of a failed test to the
// directory GOBTRFS_KEEP_FAILED names, if set.
func keepOnFailure(t *testing.T, devs []string) {
	dir := os.Getenv("GOBTRFS_KEEP_FAILED")
	if !t.Failed() || dir == "" {
		return
	}
	for i, d := range devs {
		b, err := os.ReadFile(d)
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s-dev%d.img", strings.ReplaceAll(t.Name(), "/", "_"), i+1)), b, 0o644)
		}
		if err != nil {
			t.Log(err)
		}
	}
}

// blockGroupsOf is the block groups of an open filesystem's last commit.
func blockGroupsOf(t *testing.T, fsys *btrfs.FS) []btrfs.BlockGroupInfo {
	t.Helper()
	info, err := fsys.Info()
	if err != nil {
		t.Fatal(err)
	}
	return info.BlockGroups
}

// groupStartsMulti is the starts of the block groups of type typ of the
// set devs.
func groupStartsMulti(t *testing.T, devs []string, typ string) []uint64 {
	t.Helper()
	fsys, err := btrfs.Open(devs[0], &btrfs.Options{Devices: devs[1:]})
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	var out []uint64
	for _, g := range blockGroupsOf(t, fsys) {
		if g.Type == typ {
			out = append(out, g.Start)
		}
	}
	return out
}

// randomData is n random bytes.
func randomData(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// TestResizeShrinkMultiDevice shrinks one device of multi-device
// filesystems made by mkfs.btrfs, with data and metadata in RAID1,
// RAID10, RAID5, RAID6, RAID1C3 with single data, RAID1C4 with RAID0
// data and DUP with single data, filled
// by the kernel and by us, step by step until what it holds no longer
// fits: each step moves the chunks with a stripe past the new end (the
// files' extents change address; RAID chunks take stripes on the devices
// that have room), the device item, the device's superblock and the
// filesystem's total take the new size, the device's image file is
// truncated, btrfs check --check-data-csum is clean and our reads are
// the same. The shrink that cannot fit is refused up front, naming the
// device, with every device file unchanged. At the end the kernel sees
// every file, writes more, and check stays clean.
func TestResizeShrinkMultiDevice(t *testing.T) {
	btrfstest.RequireInterop(t)
	for i, c := range []struct {
		name      string
		devices   int
		devSize   uint64
		data, md  string
		shrinkDev uint64
		fileSize  int
		// movesSystem: the shrink moves mkfs.btrfs's SYSTEM chunk
		// (on device 1 at 21 MiB), so the sys_chunk_array changes.
		movesSystem bool
	}{
		// Sizes that make the files fill more than one data chunk
		// (mkfs.btrfs's first, then 10% of the filesystem each).
		{"raid1", 2, 256 << 20, "raid1", "raid1", 2, 2 << 20, false},
		{"raid10", 4, 256 << 20, "raid10", "raid10", 3, 4 << 20, false},
		// Four devices: when the shrunk one is full, new chunks still
		// have three stripes. (A two-stripe RAID5 chunk, which the
		// kernel makes too when only two devices have room, fails
		// btrfs check 6.2's --check-data-csum on its rebuilt copies
		// even when the kernel wrote it: a btrfs-progs bug.)
		{"raid5", 4, 128 << 20, "raid5", "raid5", 1, 2 << 20, true},
		{"raid1c3-single-data", 3, 128 << 20, "single", "raid1c3", 2, 2 << 20, false},
		{"raid6", 4, 256 << 20, "raid6", "raid6", 2, 4 << 20, false},
		{"raid0-raid1c4", 4, 128 << 20, "raid0", "raid1c4", 4, 2 << 20, false},
		{"single-dup", 2, 128 << 20, "single", "dup", 1, 2 << 20, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			devSize := c.devSize
			r := rand.New(rand.NewChaCha8([32]byte{40, byte(i)}))
			devs := btrfstest.MkfsMulti(t, btrfstest.MkfsOptions{Size: int64(devSize), NumDevices: c.devices,
				NodeSize: 4096, DataProfile: c.data, MetadataProfile: c.md})
			defer keepOnFailure(t, devs)
			files := map[string][]byte{}
			// The kernel writes first, then we do; every other file goes,
			// leaving used extents spread over the chunks.
			dir := btrfstest.Mount(t, "", devs...)
			for k := range 12 {
				name := fmt.Sprintf("k%d", k)
				files[name] = randomData(r, c.fileSize+k*4096)
				if err := os.WriteFile(filepath.Join(dir, name), files[name], 0o644); err != nil {
					t.Fatal(err)
				}
			}
			btrfstest.Unmount(t, dir)
			fsys := openWritable(t, devs)
			if err := writeRandomFiles(t, fsys, r, "g", 24, c.fileSize, files); err != nil {
				t.Fatal(err)
			}
			for k := 0; k < 120; k++ { // some metadata of ours, small inline files
				name := fmt.Sprintf("s%d", k)
				files[name] = randomData(r, 1000+k)
				if err := fsys.WriteFile(name, files[name], 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if err := fsys.Commit(); err != nil {
				t.Fatal(err)
			}
			for k := 0; k < 12; k += 2 {
				for _, name := range []string{fmt.Sprintf("k%d", k), fmt.Sprintf("g%d", 2*k), fmt.Sprintf("g%d", 2*k+1)} {
					if err := fsys.Remove(name); err != nil {
						t.Fatal(err)
					}
					delete(files, name)
				}
			}
			if err := fsys.Close(); err != nil {
				t.Fatal(err)
			}
			btrfstest.Check(t, devs, true)

			system := groupStartsMulti(t, devs, "SYSTEM")
			size := devSize
			const step = 32 << 20
			moved, steps, cut, gone := 0, 0, 0, 0
			// Down to 16 MiB: past the first chunks mkfs.btrfs made,
			// SYSTEM among them (on device 1 at 21 MiB).
			for size > 16<<20 {
				next := max(size-step, 16<<20)
				rfs := openWritable(t, devs)
				before := extentAddrs(t, rfs, files)
				groups := map[uint64]uint64{}
				for _, g := range blockGroupsOf(t, rfs) {
					groups[g.Start] = g.Length
				}
				rfs.Close()
				sum := multiSum(t, devs)
				err := resizeMulti(t, devs, c.shrinkDev, next)
				if errors.Is(err, btrfs.ErrNoSpace) {
					t.Logf("shrinking device %d to %d MiB refused: %v", c.shrinkDev, next>>20, err)
					if !strings.Contains(err.Error(), fmt.Sprintf("device %d", c.shrinkDev)) || !strings.Contains(err.Error(), "bytes more would be needed") {
						t.Errorf("the refusal does not name the device and the bytes missing: %v", err)
					}
					if multiSum(t, devs) != sum {
						t.Error("the refused shrink changed the device files")
					}
					break
				}
				if err != nil {
					t.Fatalf("shrink device %d to %d: %v", c.shrinkDev, next, err)
				}
				size = next
				steps++
				btrfstest.Check(t, devs, true)
				rfs = openWritable(t, devs)
				info, err := rfs.Info()
				if err != nil {
					t.Fatal(err)
				}
				var total uint64
				for _, d := range info.Devices {
					want := devSize
					if d.ID == c.shrinkDev {
						want = size
					}
					if d.TotalBytes != want {
						t.Errorf("device %d: total_bytes %d, want %d", d.ID, d.TotalBytes, want)
					}
					total += d.TotalBytes
				}
				if info.TotalBytes != total {
					t.Errorf("total_bytes %d, the devices hold %d", info.TotalBytes, total)
				}
				if fi, err := os.Stat(devs[c.shrinkDev-1]); err != nil || uint64(fi.Size()) != size {
					t.Errorf("device %d's file after shrinking to %d: %v", c.shrinkDev, size, err)
				}
				for k, a := range extentAddrs(t, rfs, files) {
					if before[k] != a {
						moved++
					}
				}
				now := map[uint64]uint64{}
				for _, g := range blockGroupsOf(t, rfs) {
					now[g.Start] = g.Length
				}
				for start, length := range groups {
					switch n, ok := now[start]; {
					case !ok:
						gone++
					case n < length:
						cut++
					}
				}
				sameFiles(t, rfs, files)
				rfs.Close()
			}
			t.Logf("device %d shrunk to %d MiB in %d steps, %d extents moved, %d block groups cut, %d removed",
				c.shrinkDev, size>>20, steps, moved, cut, gone)
			if steps == 0 || moved == 0 {
				t.Fatalf("%d shrinks, %d extents moved: want data moved", steps, moved)
			}
			if now := groupStartsMulti(t, devs, "SYSTEM"); c.movesSystem && slices.Equal(now, system) {
				t.Errorf("the SYSTEM block groups %v did not move", system)
			}
			switch {
			case c.md == "raid10" || c.md == "raid5" || c.md == "raid6":
				// Striped chunks (stripes shorter than the chunk) move
				// whole, as the kernel moves them.
				if cut != 0 {
					t.Errorf("%d %s block groups cut", cut, c.md)
				}
			case gone == 0 && cut == 0:
				t.Error("no block group cut or removed")
			}
			kernelSeesMulti(t, devs, files)
			// The kernel writes more on the shrunk set.
			dir = btrfstest.Mount(t, "", devs...)
			for k := range 4 {
				name := fmt.Sprintf("after%d", k)
				files[name] = randomData(r, 1<<20+k)
				if err := os.WriteFile(filepath.Join(dir, name), files[name], 0o644); err != nil {
					t.Fatal(err)
				}
			}
			btrfstest.Unmount(t, dir)
			btrfstest.Check(t, devs, true)
			rfs := openWritable(t, devs)
			sameFiles(t, rfs, files)
			rfs.Close()
		})
	}
}

// TestResizeShrinkMultiDevicePowerLoss cuts the power during a shrink of
// device 2 of a RAID1 pair that moves data (at every write and sync, or,
// should the shrink make more than 200, at every sync, the last writes,
// where the superblocks go, and a sample of the others; what went out
// stays, the rest fails): every set left opens, btrfs check
// --check-data-csum is clean, the files are the same, and device 2 has
// the old size or the new one. The sets left at the superblock writes
// (the devices possibly a generation apart) take one more change and
// stay clean.
func TestResizeShrinkMultiDevicePowerLoss(t *testing.T) {
	btrfstest.RequireInterop(t)
	const old = 256 << 20
	r := rand.New(rand.NewChaCha8([32]byte{41}))
	devs := btrfstest.MkfsMulti(t, btrfstest.MkfsOptions{Size: old, NumDevices: 2, NodeSize: 4096,
		DataProfile: "raid1", MetadataProfile: "raid1"})
	files := map[string][]byte{}
	fsys := openWritable(t, devs)
	if err := writeRandomFiles(t, fsys, r, "f", 36, 2<<20, files); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Commit(); err != nil {
		t.Fatal(err)
	}
	for k := 0; k < 36; k += 2 {
		name := fmt.Sprintf("f%d", k)
		if err := fsys.Remove(name); err != nil {
			t.Fatal(err)
		}
		delete(files, name)
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	base := make([]*crashImage, len(devs))
	for i, d := range devs {
		base[i] = readImage(t, d)
	}
	work := t.TempDir()
	restore := func() []string {
		var paths []string
		for i, b := range base {
			paths = append(paths, filepath.Join(work, fmt.Sprintf("dev%d.img", i)))
			b.save(t, paths[i])
		}
		return paths
	}
	// The smallest size, in 32 MiB steps, that a shrink reaches.
	target := uint64(0)
	for size := uint64(old - 32<<20); size >= 64<<20; size -= 32 << 20 {
		if err := resizeMulti(t, restore(), 2, size); err != nil {
			break
		}
		target = size
	}
	if target == 0 {
		t.Fatal("no shrink succeeded")
	}
	// run restores the base set and shrinks device 2 to target, losing
	// the power at the ops in lose (1-based, counting writes and syncs;
	// from the first on, everything fails).
	run := func(lossAt int) (paths []string, ops []blockdev.Op, err error) {
		paths = restore()
		var mu sync.Mutex
		lost := false
		open := func(path string, readOnly bool) (blockdev.Device, error) {
			f, err := blockdev.OpenFile(path, readOnly)
			if err != nil {
				return nil, err
			}
			faulty := blockdev.NewFaulty(f)
			faulty.SetHook(func(op blockdev.FaultOp) error {
				if op.Op == blockdev.OpRead {
					return nil
				}
				mu.Lock()
				defer mu.Unlock()
				ops = append(ops, op.Op)
				if lossAt > 0 && len(ops) >= lossAt {
					lost = true
				}
				if lost {
					return errPowerLost
				}
				return nil
			})
			return faulty, nil
		}
		fsys, err := btrfs.OpenWritableWith(paths[0], &btrfs.Options{Devices: paths[1:]}, blockdev.ScanOptions{Open: open})
		if err != nil {
			t.Fatalf("open for writing: %v", err)
		}
		_, err = fsys.Resize(2, target)
		fsys.Close()
		if lossAt > 0 && !lost {
			t.Fatalf("loss at %d of %d: not reached", lossAt, len(ops))
		}
		return paths, ops, err
	}
	// state checks a set after a run: clean, the same files, device 2
	// at the old size or the target; it returns that size.
	state := func(paths []string, what string) uint64 {
		btrfstest.Check(t, paths, true)
		f, err := btrfs.Open(paths[0], &btrfs.Options{Devices: paths[1:]})
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		defer f.Close()
		info, err := f.Info()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		size := info.Devices[1].TotalBytes
		if size != old && size != target || info.TotalBytes != old+size || info.Devices[0].TotalBytes != old {
			t.Fatalf("%s: total_bytes %d, devices %+v; want device 2 at %d or %d", what, info.TotalBytes, info.Devices, old, target)
		}
		sameFiles(t, f, files)
		return size
	}
	rfs := openWritable(t, devs)
	addrs := extentAddrs(t, rfs, files)
	rfs.Close()
	paths, ops, err := run(0)
	if err != nil {
		t.Fatalf("shrink without a power loss: %v", err)
	}
	if got := state(paths, "no loss"); got != target {
		t.Fatalf("shrink without a power loss left device 2 at %d", got)
	}
	rfs = openWritable(t, paths)
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
	var pts []int
	for i, op := range ops {
		if len(ops) <= 200 || op == blockdev.OpSync || i >= len(ops)-12 || r.IntN(len(ops)) < 48 {
			pts = append(pts, i+1)
		}
	}
	t.Logf("shrinking device 2 from %d to %d MiB: %d writes and syncs, %d extents moved; trying %d loss points",
		old>>20, target>>20, len(ops), moved, len(pts))
	sizes := map[uint64]int{}
	for _, p := range pts {
		paths, _, err := run(p)
		what := fmt.Sprintf("loss at %d of %d", p, len(ops))
		if err == nil {
			t.Fatalf("%s: the shrink succeeded", what)
		}
		sizes[state(paths, what)]++
		if p > len(ops)-12 {
			fsys, err := btrfs.OpenWritable(paths[0], &btrfs.Options{Devices: paths[1:]})
			if err != nil {
				t.Fatalf("%s: open for writing: %v", what, err)
			}
			if err := fsys.WriteFile("z", []byte("on\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := fsys.Close(); err != nil {
				t.Fatal(err)
			}
			btrfstest.Check(t, paths, true)
		}
	}
	t.Logf("after the losses: %d times the old size, %d times the new", sizes[old], sizes[target])
	if sizes[old] == 0 {
		t.Error("no power loss left the old size")
	}
}
