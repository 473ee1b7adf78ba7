package txn_test

import (
	"bytes"
	"crypto/rand"
	"os"
	"path/filepath"
	"testing"

	"github.com/gobtrfs/btrfs/internal/blockdev"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
	"github.com/gobtrfs/btrfs/internal/disk"
	"github.com/gobtrfs/btrfs/internal/txn"
)

// TestWriteDataShared stores data with WriteDataShared after a small
// write that is held back: the held write reaches the device first (the
// shared one is not staged), both read back, the bytes are counted as
// shared or refused (the host decides), and misuse is refused as for
// WriteData.
func TestWriteDataShared(t *testing.T) {
	btrfstest.RequireProgs(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{})
	p := make([]byte, 64<<10)
	rand.Read(p)
	hostPath := filepath.Join(t.TempDir(), "host")
	if err := os.WriteFile(hostPath, p, 0o644); err != nil {
		t.Fatal(err)
	}
	host, err := os.Open(hostPath)
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	fs, err := txn.Open([]string{img})
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	tx, err := fs.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Abort()
	ss := uint64(tx.SectorSize())
	a, err := tx.AllocData(ss, 0)
	if err != nil {
		t.Fatal(err)
	}
	small := bytes.Repeat([]byte{0x5a}, int(ss))
	if err := tx.WriteData(a, small); err != nil { // held back
		t.Fatal(err)
	}
	b, err := tx.AllocData(uint64(len(p)), 0)
	if err != nil {
		t.Fatal(err)
	}
	src := blockdev.HostRange{File: host}
	if err := tx.WriteDataShared(b, p[:ss-1], src); err == nil {
		t.Error("unaligned shared write accepted")
	}
	if err := tx.WriteDataShared(b+disk.LogicalAddr(len(p)), p[:ss], src); err == nil {
		t.Error("shared write outside the allocation accepted")
	}
	if err := tx.WriteDataShared(b, p, src); err != nil {
		t.Fatal(err)
	}
	// The held write is on the device now: read it past the
	// transaction, straight from the image file.
	phys := physicalOf(t, fs, a)
	got := make([]byte, ss)
	f, err := os.Open(img)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.ReadAt(got, int64(phys)); err != nil || !bytes.Equal(got, small) {
		t.Errorf("the write held back before the shared one is not on the device (%v)", err)
	}
	back := make([]byte, len(p))
	if err := tx.ReadData(b, back); err != nil || !bytes.Equal(back, p) {
		t.Errorf("shared data read back other bytes (%v)", err)
	}
	if shared, refused := fs.BytesShared(); shared+refused != int64(len(p)) {
		t.Errorf("shared %d + refused %d bytes, want %d", shared, refused, len(p))
	}
}

// physicalOf is where logical address l of a SINGLE data chunk lies on
// the device.
func physicalOf(t *testing.T, fs *txn.FS, l disk.LogicalAddr) uint64 {
	t.Helper()
	c, err := fs.Chunks().Lookup(l)
	if err != nil {
		t.Fatal(err)
	}
	return uint64(c.Item().Stripes[0].Offset) + uint64(l-c.Logical())
}
