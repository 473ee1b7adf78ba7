package btrfs_test

import (
	"bytes"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/blockdev"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
	"github.com/gobtrfs/btrfs/internal/disk"
	"github.com/gobtrfs/btrfs/internal/fsview"
)

// gatedDevice holds back every write of tree blocks (node-sized blocks
// carrying the filesystem's fsid) while the gate is shut, so a test can
// act while a commit's blocks are prepared but not yet on the device.
type gatedDevice struct {
	blockdev.Device
	fsid     disk.UUID
	nodeSize int

	mu      sync.Mutex
	shut    bool
	data    bool          // the gate holds back the other writes (data) instead
	open    chan struct{} // closed when the gate opens
	blocked chan struct{} // closed when the first write waits at the gate
	waiting bool
}

// openGated opens img for writing through a gatedDevice (open, until the
// test shuts it) that holds back tree blocks, or with data set the other
// writes.
func openGated(t *testing.T, img string, opts *btrfs.Options, data bool) (*btrfs.FS, *gatedDevice) {
	t.Helper()
	var gd *gatedDevice
	open := func(p string, ro bool) (blockdev.Device, error) {
		d, err := blockdev.OpenFile(p, ro)
		if err != nil {
			return nil, err
		}
		gd = &gatedDevice{Device: d, open: make(chan struct{}), blocked: make(chan struct{}), data: data}
		return gd, nil
	}
	fsys, err := btrfs.OpenWritableWith(img, opts, blockdev.ScanOptions{Open: open})
	if err != nil {
		t.Fatal(err)
	}
	sb := fsview.Of(fsys).Superblock()
	gd.mu.Lock()
	gd.fsid, gd.nodeSize = sb.MetadataFSID(), int(sb.NodeSize)
	gd.mu.Unlock()
	return fsys, gd
}

func (d *gatedDevice) WriteAt(p []byte, off int64) (int, error) {
	d.mu.Lock()
	shut, open := d.shut && d.isTreeBlocks(p, off) != d.data && !isSuperWrite(off, len(p)), d.open
	if shut && !d.waiting {
		d.waiting = true
		close(d.blocked)
	}
	d.mu.Unlock()
	if shut {
		<-open
	}
	return d.Device.WriteAt(p, off)
}

func (d *gatedDevice) isTreeBlocks(p []byte, off int64) bool {
	if d.nodeSize == 0 || len(p) == 0 || len(p)%d.nodeSize != 0 || isSuperWrite(off, len(p)) {
		return false
	}
	for b := 0; b < len(p); b += d.nodeSize {
		if !bytes.Equal(p[b+0x20:b+0x30], d.fsid[:]) {
			return false
		}
	}
	return true
}

// TestReadsWhileTreeBlocksInFlight: a commit's tree blocks are written by
// its flight, outside the FS lock, after Prepare has put them in the
// block cache pinned (docs/design/0009). While they are not on the device
// yet, the read side and the next transaction must be served from the
// cache, whatever its budget: here a cache of a few blocks, and a device
// that holds the writes back.
func TestReadsWhileTreeBlocksInFlight(t *testing.T) {
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{Size: 256 << 20, NodeSize: 4096})
	// A budget of 16 blocks: most of what a commit writes cannot stay in
	// the LRU list, only pinned.
	fsys, gd := openGated(t, img, &btrfs.Options{CacheBytes: 64 << 10}, false)

	// Enough files for a tree of several levels, committed normally.
	want := map[string][]byte{}
	write := func(prefix string, n int) {
		t.Helper()
		for i := range n {
			name := fmt.Sprintf("%s%03d", prefix, i)
			want[name] = bytes.Repeat([]byte(name), 1+i%300)
			if err := fsys.WriteFile(name, want[name], 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	write("a", 300)
	if err := fsys.Sync(); err != nil {
		t.Fatal(err)
	}

	// The next commit's tree blocks are held at the gate.
	write("b", 200)
	gd.mu.Lock()
	gd.shut = true
	gd.mu.Unlock()
	synced := make(chan error, 1)
	go func() { synced <- fsys.Sync() }()
	select {
	case <-gd.blocked:
	case err := <-synced:
		t.Fatalf("Sync returned (%v) without writing tree blocks", err)
	case <-time.After(time.Minute):
		t.Fatal("no tree block write reached the device")
	}

	check := func(when string) {
		t.Helper()
		for name, data := range want {
			got, err := fsys.ReadFile(name)
			if err != nil {
				t.Fatalf("%s: read %s: %v", when, name, err)
			}
			if !bytes.Equal(got, data) {
				t.Fatalf("%s: %s holds %d bytes, want %d", when, name, len(got), len(data))
			}
		}
	}
	check("commit's blocks held back")
	// The next transaction copies the held-back blocks on write.
	write("c", 200)
	for i := range 100 {
		name := fmt.Sprintf("a%03d", i)
		if err := fsys.Remove(name); err != nil {
			t.Fatal(err)
		}
		delete(want, name)
	}
	check("next transaction beside the held-back commit")

	gd.mu.Lock()
	gd.shut = false
	close(gd.open)
	gd.mu.Unlock()
	if err := <-synced; err != nil {
		t.Fatal(err)
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	btrfstest.Check(t, []string{img}, true)
	ro, err := btrfs.Open(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	for name, data := range want {
		got, err := ro.ReadFile(name)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("after reopening: %s: %d bytes, %v", name, len(got), err)
		}
	}
}

// TestReadsWaitForDataInFlight: a commit's data written behind lands in
// its flight (Flight.landData), outside the FS lock. The read side shows
// the commit at once, so a read of its data must wait until the data is
// on the device, not read what was there before (which fails its
// checksum).
func TestReadsWaitForDataInFlight(t *testing.T) {
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{Size: 256 << 20})
	fsys, gd := openGated(t, img, nil, true)

	// Files past the inline limit and below the write-behind's large
	// writes: their data is staged and written behind.
	want := map[string][]byte{}
	for i := range 8 {
		name := fmt.Sprintf("f%d", i)
		want[name] = bytes.Repeat([]byte{byte('a' + i)}, 64<<10)
	}
	gd.mu.Lock()
	gd.shut = true
	gd.mu.Unlock()
	for name, data := range want {
		if err := fsys.WriteFile(name, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	synced := make(chan error, 1)
	go func() { synced <- fsys.Sync() }()
	select {
	case <-gd.blocked:
	case err := <-synced:
		t.Fatalf("Sync returned (%v) without writing data", err)
	case <-time.After(time.Minute):
		t.Fatal("no data write reached the device")
	}
	type result struct {
		name string
		data []byte
		err  error
	}
	reads := make(chan result, len(want))
	for name := range want {
		go func() {
			data, err := fsys.ReadFile(name)
			reads <- result{name, data, err}
		}()
	}
	// Give a read that does not wait every chance to read the device now.
	time.Sleep(200 * time.Millisecond)
	gd.mu.Lock()
	gd.shut = false
	close(gd.open)
	gd.mu.Unlock()
	for range want {
		r := <-reads
		if r.err != nil || !bytes.Equal(r.data, want[r.name]) {
			t.Fatalf("read %s while its data was held back: %d bytes, %v", r.name, len(r.data), r.err)
		}
	}
	if err := <-synced; err != nil {
		t.Fatal(err)
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	btrfstest.Check(t, []string{img}, true)
}
