package btrfs_test

import (
	"bytes"
	"io"
	"os"
	"testing"

	"github.com/gobtrfs/btrfs/internal/blockdev"
)

// Images and devices of the power-loss tests (write_crash_test.go).

// crashChunk is the unit in which images are copied, skipping zeros.
const crashChunk = 64 << 10

// crashImage is a sparse image kept in memory: its non-zero chunks.
type crashImage struct {
	size   int64
	chunks map[int64][]byte
}

// readImage loads an image file, keeping the non-zero chunks.
func readImage(t *testing.T, path string) *crashImage {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	return crashImageOf(t, f, st.Size())
}

// crashImageOf copies the non-zero chunks of size bytes of r.
func crashImageOf(t *testing.T, r io.ReaderAt, size int64) *crashImage {
	t.Helper()
	img := &crashImage{size: size, chunks: map[int64][]byte{}}
	// One buffer is read into and copied when not zero: large, mostly
	// empty images are scanned without allocating their size.
	zero, buf := make([]byte, crashChunk), make([]byte, crashChunk)
	for off := int64(0); off < size; off += crashChunk {
		b := buf[:min(crashChunk, size-off)]
		if _, err := r.ReadAt(b, off); err != nil && err != io.EOF {
			t.Fatal(err)
		}
		if !bytes.Equal(b, zero[:len(b)]) {
			img.chunks[off] = bytes.Clone(b)
		}
	}
	return img
}

// save writes the image to a new sparse file at path.
func (img *crashImage) save(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(img.size); err != nil {
		t.Fatal(err)
	}
	for off, b := range img.chunks {
		if _, err := f.WriteAt(b, off); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// mem is the image as a Mem with everything synced.
func (img *crashImage) mem(t *testing.T) *blockdev.Mem {
	t.Helper()
	m := blockdev.NewMem(img.size)
	for off, b := range img.chunks {
		if _, err := m.WriteAt(b, off); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Sync(); err != nil {
		t.Fatal(err)
	}
	return m
}

// teeDevice is the transaction side's device: every write goes to the
// image file (which the read side and the reopen after Commit read) and
// to a Mem mirror, whose unsynced writes are what a power loss may keep
// or drop.
type teeDevice struct {
	file blockdev.Device
	mem  *blockdev.Mem
}

func (d *teeDevice) ReadAt(p []byte, off int64) (int, error) { return d.mem.ReadAt(p, off) }

func (d *teeDevice) WriteAt(p []byte, off int64) (int, error) {
	if _, err := d.file.WriteAt(p, off); err != nil {
		return 0, err
	}
	return d.mem.WriteAt(p, off)
}

func (d *teeDevice) Size() int64 { return d.mem.Size() }

func (d *teeDevice) Sync() error {
	if err := d.file.Sync(); err != nil {
		return err
	}
	return d.mem.Sync()
}

func (d *teeDevice) Close() error { return d.file.Close() }
