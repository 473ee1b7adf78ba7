//go:build linux

package fuse_test

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/fuse"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// requireFUSE skips the test without /dev/fuse and fusermount3, or fails
// it when GOBTRFS_INTEROP=1 (CI), like every interop requirement. The
// tests compare with the kernel's btrfs, so they need that too.
func requireFUSE(t *testing.T) {
	t.Helper()
	btrfstest.RequireInterop(t)
	reason := ""
	if _, err := os.Stat("/dev/fuse"); err != nil {
		reason = "no /dev/fuse: " + err.Error()
	} else if _, err := exec.LookPath("fusermount3"); err != nil {
		reason = "fusermount3 not found on PATH"
	}
	if reason == "" {
		return
	}
	if os.Getenv(btrfstest.InteropEnv) == "1" {
		t.Fatalf("%s=1 but FUSE is unavailable: %s", btrfstest.InteropEnv, reason)
	}
	t.Skipf("FUSE unavailable (set %s=1 to make this fatal): %s", btrfstest.InteropEnv, reason)
}

// mounted is one of our mounts in a test.
type mounted struct {
	dir  string
	fsys *btrfs.FS
	srv  *fuse.Server
	once sync.Once
}

// mountImage opens img (writable unless opts.ReadOnly) and mounts it on a
// new directory under t.TempDir(). Cleanup unmounts it and closes the FS,
// also when the test fails; unmount does it earlier.
func mountImage(t *testing.T, img string, opts *fuse.Options, bo *btrfs.Options) *mounted {
	t.Helper()
	requireFUSE(t)
	if opts == nil {
		opts = &fuse.Options{}
	}
	var (
		fsys *btrfs.FS
		err  error
	)
	if opts.ReadOnly {
		fsys, err = btrfs.Open(img, bo)
	} else {
		fsys, err = btrfs.OpenWritable(img, bo)
	}
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	srv, err := fuse.Mount(dir, fsys, opts)
	if err != nil {
		fsys.Close()
		t.Fatal(err)
	}
	m := &mounted{dir: dir, fsys: fsys, srv: srv}
	t.Cleanup(func() { m.unmount(t) })
	return m
}

// unmount unmounts (waiting while files are still open, then lazily),
// waits for the server and closes the FS, which commits.
func (m *mounted) unmount(t *testing.T) {
	t.Helper()
	m.once.Do(func() {
		var err error
		for range 50 {
			if err = m.srv.Unmount(); err == nil || !isBusy(err) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			t.Errorf("unmount %s: %v; detaching lazily", m.dir, err)
			_ = exec.Command("fusermount3", "-u", "-z", m.dir).Run()
		}
		m.srv.Wait()
		if err := m.fsys.Close(); err != nil {
			t.Errorf("close after unmount: %v", err)
		}
	})
}

func isBusy(err error) bool {
	return errors.Is(err, syscall.EBUSY) || strings.Contains(err.Error(), "busy")
}
