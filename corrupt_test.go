package btrfs_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
	"github.com/gobtrfs/btrfs/internal/disk"
	"github.com/gobtrfs/btrfs/internal/fsview"
)

// sparseImage is an image held in memory as its non-zero 4 KiB sectors.
type sparseImage struct {
	size    int64
	sectors map[int64][]byte // by sector index
	order   []int64          // sector indexes, sorted, for picking at random
}

func loadSparse(t testing.TB, path string) *sparseImage {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	img := &sparseImage{size: st.Size(), sectors: map[int64][]byte{}}
	buf := make([]byte, 4096)
	for i := int64(0); i*4096 < img.size; i++ {
		n, err := f.ReadAt(buf, i*4096)
		if n == 0 && err != nil {
			break
		}
		if !bytes.Equal(buf[:n], make([]byte, n)) {
			img.sectors[i] = bytes.Clone(buf[:n])
			img.order = append(img.order, i)
		}
	}
	sort.Slice(img.order, func(a, b int) bool { return img.order[a] < img.order[b] })
	return img
}

// mutated is a view of a sparseImage with some bytes changed.
type mutated struct {
	base  *sparseImage
	patch map[int64][]byte // replaced sectors
	size  int64
}

func (m *mutated) Size() int64 { return m.size }

func (m *mutated) ReadAt(p []byte, off int64) (int, error) {
	if off >= m.size {
		return 0, io.EOF
	}
	n := len(p)
	var err error
	if int64(n) > m.size-off {
		n, err = int(m.size-off), io.EOF
	}
	for i := 0; i < n; {
		sec := (off + int64(i)) / 4096
		in := int((off + int64(i)) % 4096)
		c := min(4096-in, n-i)
		src := m.patch[sec]
		if src == nil {
			src = m.base.sectors[sec]
		}
		if src == nil || in >= len(src) {
			clear(p[i : i+c])
		} else {
			k := copy(p[i:i+c], src[in:])
			clear(p[i+k : i+c])
		}
		i += c
	}
	return n, err
}

// mutate flips n random bytes of non-zero sectors. When reseal is set and
// the sector belongs to a tree block, the block's checksum is recomputed,
// as a buggy writer would leave it, so the damage reaches the decoders.
func (img *sparseImage) mutate(r *rand.Rand, n int, reseal bool, nodesize int, csum disk.CsumType) *mutated {
	m := &mutated{base: img, patch: map[int64][]byte{}, size: img.size}
	for i := 0; i < n; i++ {
		sec := img.order[r.IntN(len(img.order))]
		b := m.patch[sec]
		if b == nil {
			b = bytes.Clone(img.sectors[sec])
			m.patch[sec] = b
		}
		b[r.IntN(len(b))] ^= byte(1 + r.IntN(255))
		if reseal {
			m.reseal(sec, nodesize, csum)
		}
	}
	return m
}

// reseal recomputes the checksum of the tree block holding sector sec, if
// the block looks like one (physical offset aligned to nodesize is how
// mkfs lays them out in its metadata chunks).
func (m *mutated) reseal(sec int64, nodesize int, csum disk.CsumType) {
	start := sec * 4096 / int64(nodesize) * int64(nodesize)
	blk := make([]byte, nodesize)
	m.ReadAt(blk, start)
	if binary.LittleEndian.Uint64(blk[0x50:]) == 0 { // no generation: not a tree block
		return
	}
	csum.SumBlock(blk)
	for o := 0; o < nodesize; o += 4096 {
		m.patch[(start+int64(o))/4096] = bytes.Clone(blk[o : o+4096])
	}
}

// exercise reads everything reachable and returns how many errors it met;
// every error must be corruption or a plain io/fs condition, never a panic.
func exercise(t *testing.T, fsys *btrfs.FS) (errs int) {
	check := func(p string, err error) {
		if err == nil {
			return
		}
		errs++
		if !errors.Is(err, btrfs.ErrCorrupt) && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, fs.ErrInvalid) &&
			!errors.Is(err, btrfs.ErrMissingDevice) {
			var pe *fs.PathError
			if !errors.As(err, &pe) {
				t.Errorf("%s: error neither corruption nor an fs error: %v", p, err)
			}
		}
	}
	fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		check(p, err)
		if err != nil || d == nil {
			return nil
		}
		_, err = fsys.Xattrs(p)
		check(p, err)
		switch {
		case d.Type().IsRegular():
			f, err := fsys.OpenFile(p)
			check(p, err)
			if err == nil {
				// A damaged i_size can make a file of exabytes of holes:
				// reading it all is correct and endless, so read the first
				// 64 MiB and the last 1 MiB the size claims.
				_, err = io.Copy(io.Discard, io.LimitReader(f, 64<<20))
				check(p, err)
				if st, serr := f.Stat(); serr == nil && st.Size() > 64<<20 {
					_, err = f.ReadAt(make([]byte, 1<<20), st.Size()-1<<20)
					if err != io.EOF {
						check(p, err)
					}
				}
				f.Close()
			}
		case d.Type()&fs.ModeSymlink != 0:
			_, err := fsys.ReadLink(p)
			check(p, err)
		}
		return nil
	})
	_, err := fsys.Subvolumes()
	check("subvolumes", err)
	_, err = fsys.Info()
	check("info", err)
	return errs
}

// TestRandomCorruption flips bytes in committed fixture images, with and
// without fixing up the block checksums, and reads everything: never a
// panic or a hang, and every error is typed. Seed: GOBTRFS_SEED.
func TestRandomCorruption(t *testing.T) {
	seed := rand.Uint64()
	if s := os.Getenv("GOBTRFS_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d (set GOBTRFS_SEED to replay)", seed)
	r := rand.New(rand.NewPCG(seed, 0))
	rounds := 60
	if testing.Short() {
		rounds = 15
	}
	for _, name := range []string{"rootdir-16k-crc32c", "kernel-4k-xxhash"} {
		img := loadSparse(t, btrfstest.OpenFixture(t, name))
		base, err := btrfs.OpenDevices([]btrfs.Device{&mutated{base: img, size: img.size}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		sb := fsview.Of(base).Superblock()
		base.Close()
		opened, failed := 0, 0
		for i := 0; i < rounds; i++ {
			reseal := i%2 == 0
			m := img.mutate(r, 1+r.IntN(8), reseal, int(sb.NodeSize), sb.CsumType)
			done := make(chan struct{})
			go func() {
				defer close(done)
				fsys, err := btrfs.OpenDevices([]btrfs.Device{m}, nil)
				if err != nil {
					failed++
					if !errors.Is(err, btrfs.ErrCorrupt) {
						t.Errorf("%s round %d: open error is not ErrCorrupt: %v", name, i, err)
					}
					return
				}
				opened++
				exercise(t, fsys)
				fsys.Close()
			}()
			select {
			case <-done:
			case <-time.After(2 * time.Minute):
				t.Fatalf("%s round %d: reading a damaged image did not finish (hang); seed %d", name, i, seed)
			}
		}
		t.Logf("%s: %d rounds opened, %d refused", name, opened, failed)
	}
}

// FuzzCorruptImage applies mutations chosen by the fuzzer to a committed
// fixture: every 5 bytes pick a non-zero sector (2 bytes), an offset in it
// (2 bytes) and a xor mask (1 byte); the first byte's low bit says whether
// tree-block checksums are fixed up afterwards.
func FuzzCorruptImage(f *testing.F) {
	img := loadSparse(f, btrfstest.OpenFixture(f, "rootdir-16k-crc32c"))
	base, err := btrfs.OpenDevices([]btrfs.Device{&mutated{base: img, size: img.size}}, nil)
	if err != nil {
		f.Fatal(err)
	}
	sb := fsview.Of(base).Superblock()
	base.Close()
	f.Add([]byte{1, 0, 0, 0, 16, 0xff})
	f.Add([]byte{0, 3, 0, 0, 200, 0x01, 4, 0, 1, 0, 0x80})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 1 {
			return
		}
		reseal := data[0]&1 == 1
		m := &mutated{base: img, patch: map[int64][]byte{}, size: img.size}
		for p := data[1:]; len(p) >= 5; p = p[5:] {
			sec := img.order[int(binary.LittleEndian.Uint16(p))%len(img.order)]
			b := m.patch[sec]
			if b == nil {
				b = bytes.Clone(img.sectors[sec])
				m.patch[sec] = b
			}
			b[int(binary.LittleEndian.Uint16(p[2:]))%len(b)] ^= p[4]
			if reseal {
				m.reseal(sec, int(sb.NodeSize), sb.CsumType)
			}
		}
		fsys, err := btrfs.OpenDevices([]btrfs.Device{m}, nil)
		if err != nil {
			if !errors.Is(err, btrfs.ErrCorrupt) {
				t.Fatalf("open error is not ErrCorrupt: %v", err)
			}
			return
		}
		defer fsys.Close()
		exercise(t, fsys)
	})
}
