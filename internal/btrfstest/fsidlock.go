//go:build linux

package btrfstest

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Superblock facts needed to read a filesystem's UUID (fsid) from a device.
const (
	superblockOffset = 0x10000
	superFSIDOffset  = 0x20
	superMagicOffset = 0x40
	superMagic       = "_BHRfS_M"
)

// fsidLockWait bounds how long Mount waits for another process to unmount a
// filesystem with the same fsid.
const fsidLockWait = 10 * time.Minute

// Mounting two filesystems with one fsid at a time (copies of one fixture,
// or an image and its copy) relies on the kernel's cloned-device support
// (temp-fsid), which proved racy: about one such mount in fifty failed with
// EEXIST and a sysfs warning on the kernel this was written on. So Mount
// holds an exclusive lock per fsid, across processes (flock on a file in
// os.TempDir()), from before the mount until after the unmount, and refuses
// a second mount of the same fsid within one process (it would wait for
// itself).
var heldFSIDs = struct {
	sync.Mutex
	m map[string]bool
}{m: map[string]bool{}}

// fsidLock is a held per-fsid lock.
type fsidLock struct {
	fsid string
	path string
	f    *os.File
	once sync.Once
}

// readFSID returns the hex fsid of the btrfs filesystem on a device or image.
func readFSID(dev string) (string, error) {
	f, err := os.Open(dev)
	if err != nil {
		return "", err
	}
	defer f.Close()
	sb := make([]byte, superMagicOffset+len(superMagic))
	if _, err := f.ReadAt(sb, superblockOffset); err != nil {
		return "", fmt.Errorf("read superblock of %s: %w", dev, err)
	}
	if !bytes.Equal(sb[superMagicOffset:], []byte(superMagic)) {
		return "", fmt.Errorf("%s: no btrfs superblock magic at %#x", dev, superblockOffset+superMagicOffset)
	}
	return hex.EncodeToString(sb[superFSIDOffset : superFSIDOffset+16]), nil
}

// lockFSID takes the per-fsid lock for the filesystem on dev.
func lockFSID(tb testing.TB, dev string) *fsidLock {
	tb.Helper()
	fsid, err := readFSID(dev)
	if err != nil {
		tb.Fatal(err)
	}
	heldFSIDs.Lock()
	if heldFSIDs.m[fsid] {
		heldFSIDs.Unlock()
		tb.Fatalf("filesystem %s (fsid %s) is already mounted by this test process; "+
			"mounting two copies of one filesystem at once is not supported (the kernel's temp-fsid mount is unreliable)", dev, fsid)
	}
	heldFSIDs.m[fsid] = true
	heldFSIDs.Unlock()
	l := &fsidLock{fsid: fsid}
	tb.Cleanup(l.release) // in case the caller fails before releasing
	if err := l.acquire(); err != nil {
		tb.Fatal(err)
	}
	return l
}

// acquire takes the exclusive flock on the lock file. The file is removed
// on release (so lock files do not pile up, one per filesystem ever
// mounted), which means a waiter may end up holding the lock of an unlinked
// file; so after locking, the path must still name the locked file, or the
// attempt starts over.
func (l *fsidLock) acquire() error {
	l.path = filepath.Join(os.TempDir(), "gobtrfs-fsid-"+l.fsid+".lock")
	deadline := time.Now().Add(fsidLockWait)
	for {
		f, err := os.OpenFile(l.path, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return err
		}
		if err := flockUntil(f, deadline); err != nil {
			f.Close()
			return fmt.Errorf("lock %s: %w", l.path, err)
		}
		var held, named unix.Stat_t
		if unix.Fstat(int(f.Fd()), &held) == nil && unix.Stat(l.path, &named) == nil &&
			held.Dev == named.Dev && held.Ino == named.Ino {
			l.f = f
			return nil
		}
		f.Close()
	}
}

// flockUntil waits for an exclusive flock on f until the deadline.
func flockUntil(f *os.File, deadline time.Time) error {
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil || !errors.Is(err, unix.EWOULDBLOCK) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// release drops the lock: it removes the lock file while still holding it,
// then closes it (which releases the flock). Calling it again does nothing.
func (l *fsidLock) release() {
	l.once.Do(func() {
		if l.f != nil {
			os.Remove(l.path)
			l.f.Close()
		}
		heldFSIDs.Lock()
		delete(heldFSIDs.m, l.fsid)
		heldFSIDs.Unlock()
	})
}
