package mkfs

import (
	"bytes"
	"errors"
	"io/fs"
	"path/filepath"
	"testing"
	"time"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/blockdev"
	"github.com/gobtrfs/btrfs/internal/disk"
	"github.com/gobtrfs/btrfs/internal/txn"
)

var testTime = time.Unix(1795998942, 0)

// optionSets are the combinations every test runs through.
var optionSets = []struct {
	name string
	opts Options
}{
	{"default", Options{}},
	{"n4k-single", Options{NodeSize: 4096, MetadataProfile: "single"}},
	{"n64k-xxhash", Options{NodeSize: 65536, Csum: btrfs.CsumXXHash}},
	{"sha256-datadup", Options{Csum: btrfs.CsumSHA256, DataProfile: "dup"}},
	{"blake2-alldup", Options{Csum: btrfs.CsumBlake2, MetadataProfile: "dup", DataProfile: "dup", Label: "gobtrfs"}},
	{"single-nofst", Options{MetadataProfile: "single", DataProfile: "single", Features: []string{"^free-space-tree", "^no-holes"}}},
}

// formatMem formats a fresh in-memory device of size bytes.
func formatMem(t *testing.T, size int64, opts Options) *blockdev.Mem {
	t.Helper()
	d := blockdev.NewMem(size)
	if err := formatDevice(d, opts); err != nil {
		t.Fatalf("formatDevice: %v", err)
	}
	return d
}

func reproducible(o Options) Options {
	o.Reproducible, o.Seed, o.Time = true, []byte("seed"), testTime
	return o
}

// recorder is a device that only records writes, so reproducibility can be
// checked on large sizes without holding the whole image.
type recorder struct {
	size   int64
	writes map[int64][]byte
}

func (r *recorder) ReadAt(p []byte, off int64) (int, error) {
	clear(p)
	for o, b := range r.writes {
		if o < off+int64(len(p)) && off < o+int64(len(b)) {
			lo, hi := max(o, off), min(o+int64(len(b)), off+int64(len(p)))
			copy(p[lo-off:hi-off], b[lo-o:hi-o])
		}
	}
	return len(p), nil
}

func (r *recorder) WriteAt(p []byte, off int64) (int, error) {
	if r.writes == nil {
		r.writes = map[int64][]byte{}
	}
	r.writes[off] = bytes.Clone(p)
	return len(p), nil
}

func (r *recorder) Size() int64  { return r.size }
func (r *recorder) Sync() error  { return nil }
func (r *recorder) Close() error { return nil }

func recordFormat(t *testing.T, size int64, o Options) map[int64][]byte {
	t.Helper()
	r := &recorder{size: size}
	if err := formatDevice(r, o); err != nil {
		t.Fatalf("formatDevice: %v", err)
	}
	return r.writes
}

func TestReproducible(t *testing.T) {
	for _, tc := range optionSets {
		t.Run(tc.name, func(t *testing.T) {
			o := reproducible(tc.opts)
			a := recordFormat(t, 1<<30, o)
			b := recordFormat(t, 1<<30, o)
			if len(a) != len(b) {
				t.Fatalf("%d writes, then %d", len(a), len(b))
			}
			for off, p := range a {
				if !bytes.Equal(p, b[off]) {
					t.Fatalf("two formats with the same seed and time differ at %d", off)
				}
			}
			o.Seed = []byte("other")
			c := recordFormat(t, 1<<30, o)
			if bytes.Equal(a[disk.SuperblockOffset], c[disk.SuperblockOffset]) {
				t.Fatal("a different seed gave the same superblock")
			}
		})
	}
}

// TestSuperblock checks the fields readers bootstrap from.
func TestSuperblock(t *testing.T) {
	d := formatMem(t, 256<<20, reproducible(Options{Label: "lbl"}))
	sb, _, err := blockdev.ReadSuper(d, 0)
	if err != nil {
		t.Fatal(err)
	}
	if sb.Generation != 6 || sb.ChunkRootGeneration != 6 || sb.NumDevices != 1 || sb.TotalBytes != 256<<20 {
		t.Errorf("generation %d chunk gen %d devices %d total %d", sb.Generation, sb.ChunkRootGeneration, sb.NumDevices, sb.TotalBytes)
	}
	if sb.IncompatFlags != 0x341 || sb.CompatROFlags != 0xb {
		t.Errorf("incompat %#x compat_ro %#x, want 0x341 0xb as mkfs.btrfs 6.19", sb.IncompatFlags, sb.CompatROFlags)
	}
	// Ten tree blocks: chunk, root, extent, dev, fs, csum, data-reloc,
	// UUID, free-space and block-group trees.
	if sb.BytesUsed != 10*16384 || sb.DevItem.BytesUsed != 92274688 {
		t.Errorf("bytes_used %d, device bytes_used %d, want %d and %d", sb.BytesUsed, sb.DevItem.BytesUsed, 10*16384, 92274688)
	}
	if sb.LabelString() != "lbl" {
		t.Errorf("label %q", sb.LabelString())
	}
	if _, _, err := blockdev.ReadSuper(d, 1); err != nil {
		t.Errorf("mirror at 64 MiB: %v", err)
	}
}

func TestOptionErrors(t *testing.T) {
	bad := []Options{
		{MetadataProfile: "raid1"},
		{DataProfile: "raid5"},
		{Features: []string{"mixed-bg"}, NodeSize: 16384},
		{Features: []string{"mixed-bg"}, MetadataProfile: "dup"},
		{NodeSize: 2048},
		{NodeSize: 12288},
		{SectorSize: 4096, NodeSize: 131072},
		{Csum: 9},
	}
	for _, o := range bad {
		if err := formatDevice(blockdev.NewMem(256<<20), o); !errors.Is(err, ErrUnsupported) {
			t.Errorf("%+v: error %v, want ErrUnsupported", o, err)
		}
	}
	if err := formatDevice(blockdev.NewMem(64<<20), Options{}); err == nil {
		t.Error("64 MiB device with DUP metadata accepted")
	}
	if err := formatDevice(blockdev.NewMem(64<<20), Options{Size: 128 << 20}); err == nil {
		t.Error("size beyond the device accepted")
	}
	if err := Format(filepath.Join(t.TempDir(), "none.img"), Options{}); err == nil {
		t.Error("missing file without a size accepted")
	}
}

// TestOpen formats image files and opens them with the project's reader
// and its transaction layer, which later stages use to fill them.
func TestOpen(t *testing.T) {
	for _, tc := range optionSets {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "fs.img")
			o := tc.opts
			o.Size = 1 << 30
			if err := Format(p, o); err != nil {
				t.Fatal(err)
			}
			fsys, err := btrfs.Open(p, nil)
			if err != nil {
				t.Fatalf("btrfs.Open: %v", err)
			}
			ents, err := fs.ReadDir(fsys, ".")
			if err != nil || len(ents) != 0 {
				t.Errorf("root directory: %v entries, err %v", len(ents), err)
			}
			fsys.Close()
			tfs, err := txn.Open([]string{p})
			if err != nil {
				t.Fatalf("txn.Open: %v", err)
			}
			tfs.Close()
			w, err := btrfs.OpenWritable(p, nil)
			if err != nil {
				t.Fatalf("btrfs.OpenWritable: %v", err)
			}
			w.Close()
		})
	}
}
