package chunk_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/gobtrfs/btrfs/internal/blockdev"
	"github.com/gobtrfs/btrfs/internal/chunk"
	"github.com/gobtrfs/btrfs/internal/disk"
)

// shareDev is a memory device that takes every WriteShared as shared,
// after checking that the bytes are the host's at the offset it is
// given: host holds the host file's bytes from hostBase on.
type shareDev struct {
	*blockdev.Mem
	t        *testing.T
	mu       *sync.Mutex
	host     *[]byte
	hostBase *int64
	calls    *int
}

func (d shareDev) WriteShared(p []byte, off int64, src blockdev.HostRange) (bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	*d.calls++
	rel := src.Off - *d.hostBase
	if rel < 0 || rel+int64(len(p)) > int64(len(*d.host)) || !bytes.Equal(p, (*d.host)[rel:rel+int64(len(p))]) {
		d.t.Errorf("WriteShared of %d bytes at %d names host offset %d, which holds other bytes", len(p), off, src.Off)
	}
	_, err := d.WriteAt(p, off)
	return true, err
}

// TestWriterShared writes random ranges with WriteLogicalShared to every
// geometry over devices that share: each piece of each copy is handed to
// the device with the host offset of its own bytes (the range's offset
// advanced by the piece's place in it), nothing is shared on RAID5/6
// (parity), and the copies and parity read back as after WriteLogical.
func TestWriterShared(t *testing.T) {
	rng := newRand(t)
	f, err := os.Create(filepath.Join(t.TempDir(), "host"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, g := range testGeometries() {
		t.Run(fmt.Sprintf("%s-%d", g.profile, g.n), func(t *testing.T) {
			r := newWrig(t, g.profile, g.n, 3)
			var mu sync.Mutex
			var host []byte
			var hostBase int64
			calls := 0
			devs := map[disk.DevID]blockdev.Device{}
			for id, m := range r.mems {
				devs[id] = shareDev{Mem: m, t: t, mu: &mu, host: &host, hostBase: &hostBase, calls: &calls}
			}
			w := chunk.NewWriter(r.m, devs)
			for i := range 40 {
				off, b := r.randomWrite(rng)
				mu.Lock()
				host, hostBase = b, int64(i)<<30+int64(rng.IntN(1<<20))
				mu.Unlock()
				if err := w.WriteLogicalShared(b, r.base+disk.LogicalAddr(off), blockdev.HostRange{File: f, Off: hostBase}); err != nil {
					t.Fatalf("write %d+%d: %v", off, len(b), err)
				}
				copy(r.model[off:], b)
			}
			parity := g.profile == "raid5" || g.profile == "raid6"
			if parity != (calls == 0) {
				t.Errorf("%d shared pieces on %s", calls, g.profile)
			}
			r.checkAll(t)
		})
	}
}
