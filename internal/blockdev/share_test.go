package blockdev_test

import (
	"bytes"
	"crypto/rand"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/gobtrfs/btrfs/internal/blockdev"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// TestWriteShared stores bytes with WriteShared through the stack the
// writer uses (Counted over Cache over File) and over a Mem device, in
// the test's temporary directory (the host may or may not clone there)
// and on a btrfs the kernel mounts (it must share): the device reads
// back the bytes, the cache holds them, and the counters tell shared
// bytes from written ones. A range off the host's block boundaries is
// never shared.
func TestWriteShared(t *testing.T) {
	t.Run("tmp", func(t *testing.T) { testWriteShared(t, t.TempDir(), false) })
	t.Run("btrfs", func(t *testing.T) {
		btrfstest.RequireInterop(t)
		testWriteShared(t, btrfstest.Mount(t, "", btrfstest.Mkfs(t, btrfstest.MkfsOptions{})), true)
	})
}

func testWriteShared(t *testing.T, dir string, mustShare bool) {
	data := make([]byte, 64<<10)
	rand.Read(data)
	srcPath := filepath.Join(dir, "src")
	if err := os.WriteFile(srcPath, data, 0o644); err != nil {
		t.Fatal(err)
	}
	src, err := os.Open(srcPath)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	f, err := blockdev.CreateFile(filepath.Join(dir, "img"), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	c, err := blockdev.NewCache(f, blockdev.CacheOptions{PageSize: 4096})
	if err != nil {
		t.Fatal(err)
	}
	var written atomic.Int64
	var shares blockdev.ShareCounts
	d := blockdev.NewCountedShared(c, &written, &shares)
	defer d.Close()
	// A page cached before the write must show the new bytes after it.
	if _, err := d.ReadAt(make([]byte, 4096), 8192); err != nil {
		t.Fatal(err)
	}
	shared, err := blockdev.WriteShared(d, data[4096:36864], 8192, blockdev.HostRange{File: src, Off: 4096})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the host shared: %v", shared)
	if mustShare && !shared {
		t.Error("a btrfs host did not share an aligned range")
	}
	// Off the block boundaries: written, whatever the host.
	odd, err := blockdev.WriteShared(d, data[100:4196], 65536, blockdev.HostRange{File: src, Off: 100})
	if err != nil || odd {
		t.Errorf("unaligned range: shared %v, %v; want written", odd, err)
	}
	want := int64(32768)
	if got := shares.Shared.Load() + shares.Refused.Load(); got != want+4096 {
		t.Errorf("shared %d + refused %d bytes, want %d", shares.Shared.Load(), shares.Refused.Load(), want+4096)
	}
	if shared != (shares.Shared.Load() == want) || written.Load() != shares.Refused.Load() {
		t.Errorf("counters: written %d, shared %d, refused %d (shared: %v)", written.Load(), shares.Shared.Load(), shares.Refused.Load(), shared)
	}
	for _, r := range []struct {
		off  int64
		want []byte
	}{{8192, data[4096:36864]}, {65536, data[100:4196]}} {
		got := make([]byte, len(r.want))
		if _, err := d.ReadAt(got, r.off); err != nil || !bytes.Equal(got, r.want) {
			t.Errorf("cache at %d: reads other bytes (%v)", r.off, err)
		}
		if _, err := f.ReadAt(got, r.off); err != nil || !bytes.Equal(got, r.want) {
			t.Errorf("file at %d: reads other bytes (%v)", r.off, err)
		}
	}

	// A device that cannot share writes.
	m := blockdev.NewMem(1 << 20)
	if ok, err := blockdev.WriteShared(m, data[:4096], 0, blockdev.HostRange{File: src}); ok || err != nil {
		t.Errorf("Mem: shared %v, %v", ok, err)
	}
	got := make([]byte, 4096)
	if _, err := m.ReadAt(got, 0); err != nil || !bytes.Equal(got, data[:4096]) {
		t.Errorf("Mem reads other bytes (%v)", err)
	}
	// Past the end: refused as WriteAt refuses, nothing shared.
	if _, err := blockdev.WriteShared(d, data[:8192], 1<<20-4096, blockdev.HostRange{File: src}); err == nil {
		t.Error("write past the end accepted")
	}
}
