package btrfs

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/gobtrfs/btrfs/internal/btrfstest"
	"github.com/gobtrfs/btrfs/internal/disk"
)

// heldRead starts f.ReadAt(p, 0) in its own goroutine and holds it, once,
// after it took its view and loaded the file's state (writer.readHook):
// the returned at is closed when it is there, and it goes on when release
// is called. got delivers what it read.
func heldRead(t *testing.T, fsys *FS, f *File, size int) (at <-chan struct{}, release func(), got <-chan []byte) {
	t.Helper()
	atC, go_, res := make(chan struct{}), make(chan struct{}), make(chan []byte, 1)
	var once sync.Once
	hook := func() { once.Do(func() { close(atC); <-go_ }) }
	fsys.w.readHook.Store(&hook)
	t.Cleanup(func() { fsys.w.readHook.Store(nil) })
	go func() {
		p := make([]byte, size)
		n, err := f.ReadAt(p, 0)
		if err != nil {
			t.Errorf("held read: %v", err)
		}
		res <- p[:n]
	}()
	var rel sync.Once
	return atC, func() { rel.Do(func() { close(go_) }) }, res
}

// wantOneOf fails unless b is one of the contents in want (named for the
// message).
func wantOneOf(t *testing.T, what string, b []byte, want map[string][]byte) {
	t.Helper()
	for _, w := range want {
		if bytes.Equal(b, w) {
			return
		}
	}
	names := make([]string, 0, len(want))
	for n := range want {
		names = append(names, n)
	}
	t.Errorf("%s: read %d bytes starting % x, want one of %v", what, len(b), b[:min(len(b), 8)], names)
}

// nosumFile makes name, a NODATASUM file, holding data.
func nosumFile(t *testing.T, fsys *FS, name string, data []byte) {
	t.Helper()
	if err := fsys.WriteFile(name, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := fsys.SetInodeFlags(name, uint64(disk.InodeNoDataSum), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := fsys.WriteAt(name, data, 0); err != nil {
		t.Fatal(err)
	}
}

// kernelSees mounts img read-only and fails unless each file holds its
// contents there.
func kernelSees(t *testing.T, img string, files map[string][]byte) {
	t.Helper()
	if !btrfstest.Interop() {
		return
	}
	mnt := btrfstest.Mount(t, "ro", img)
	t.Logf("kernel mount: %d files compared", len(files))
	for name, want := range files {
		b, err := os.ReadFile(filepath.Join(mnt, name))
		if err != nil || !bytes.Equal(b, want) {
			t.Errorf("kernel: %s: %d bytes (%v), want %d", name, len(b), err, len(want))
		}
	}
	btrfstest.Unmount(t, mnt)
}

// TestReadAcrossRollback: a read that took its view of the running
// transaction before a Rollback, and reads the data that transaction
// wrote (still staged for writing behind, never written) after it,
// returns the state before the Rollback or the one the view showed,
// never the device's stale bytes there. A NODATASUM file has no checksum
// to tell it read the wrong bytes; a checksummed one is read as well.
func TestReadAcrossRollback(t *testing.T) {
	btrfstest.RequireProgs(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{Size: 256 << 20})
	fsys, err := OpenWritable(img, &Options{CommitInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	const size = 64 << 10
	v0, v1 := bytes.Repeat([]byte{0x11}, size), bytes.Repeat([]byte{0x22}, size)
	nosumFile(t, fsys, "nosum", v0)
	if err := fsys.WriteFile("sum", v0, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Commit(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"nosum", "sum"} {
		f, err := fsys.OpenFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := fsys.WriteAt(name, v1, 0); err != nil {
			t.Fatal(err)
		}
		at, release, got := heldRead(t, fsys, f, size)
		select {
		case <-at:
		case <-time.After(10 * time.Second):
			t.Fatal("the read never took its view")
		}
		if err := fsys.Rollback(); err != nil {
			t.Fatal(err)
		}
		release()
		wantOneOf(t, name+", a read across the rollback", <-got, map[string][]byte{"before": v0, "rolled back": v1})
		f.Close()
		if err := wantFile(fsys, name, v0)(); err != nil {
			t.Error("after the rollback:", err)
		}
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	btrfstest.Check(t, []string{img}, true)
	kernelSees(t, img, map[string][]byte{"nosum": v0, "sum": v0})
}

// TestReadAcrossCommitMixed: on a filesystem with mixed block groups, a
// read that took its view of the running transaction while a NODATASUM
// file's data was an extent the transaction wrote, then overwrote within
// the transaction (so the commit frees it), reads after the commit is
// durable. The commit's own tree blocks go to the same groups, first fit:
// the read must still return the bytes its view showed (or a later
// state), never tree blocks. Several rounds, so the freed extent is the
// first free range at some commit.
func TestReadAcrossCommitMixed(t *testing.T) {
	btrfstest.RequireProgs(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{Size: 128 << 20, NodeSize: 4096, Extra: []string{"--mixed"}})
	fsys, err := OpenWritable(img, &Options{CommitInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	if fsys.sb.IncompatFlags&disk.IncompatMixedGroups == 0 {
		t.Fatal("mkfs.btrfs --mixed made no MIXED_GROUPS filesystem")
	}
	// One sector: the extent freed is one of the small holes the
	// commits before left among the tree blocks (a block each), so it is
	// the first fit for the commit's tree blocks.
	const size = 4096
	stamp := func(k int) []byte { return bytes.Repeat([]byte{byte(k)}, size) }
	nosumFile(t, fsys, "f", stamp(1))
	if err := fsys.Commit(); err != nil {
		t.Fatal(err)
	}
	last := stamp(1)
	for round := range 4 {
		v1, v2 := stamp(2*round+2), stamp(2*round+3)
		f, err := fsys.OpenFile("f")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := fsys.WriteAt("f", v1, 0); err != nil {
			t.Fatal(err)
		}
		at, release, got := heldRead(t, fsys, f, size)
		select {
		case <-at:
		case <-time.After(10 * time.Second):
			t.Fatal("the read never took its view")
		}
		// Overwritten within the transaction: v1's extent is freed by
		// the commit, which writes its tree blocks before the read goes on.
		if _, err := fsys.WriteAt("f", v2, 0); err != nil {
			t.Fatal(err)
		}
		if err := fsys.Commit(); err != nil {
			t.Fatal(err)
		}
		release()
		wantOneOf(t, fmt.Sprintf("round %d, a read across the commit", round), <-got,
			map[string][]byte{"committed before": last, "its view": v1, "committed": v2})
		f.Close()
		if err := wantFile(fsys, "f", v2)(); err != nil {
			t.Error("after the commit:", err)
		}
		last = v2
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	btrfstest.Check(t, []string{img}, true)
	kernelSees(t, img, map[string][]byte{"f": last})
}
