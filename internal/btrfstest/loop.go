package btrfstest

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// loopState remembers a loop device this package attached, so that it is
// detached exactly once and only while it still serves our backing file.
type loopState struct {
	backing  string // /sys/block/loopN/loop/backing_file right after attach
	detached bool
}

// loops is the registry of attached loop devices, keyed by /dev/loopN. It is
// shared by all tests of the process (parallel tests attach concurrently).
var loops = struct {
	sync.Mutex
	m map[string]*loopState
}{m: map[string]*loopState{}}

// Attach attaches an image file to a free loop device and returns the device
// path (/dev/loopN). The device is detached by tb.Cleanup unless Detach was
// called first.
func Attach(tb testing.TB, path string) string {
	tb.Helper()
	RequireInterop(tb)
	return attach(tb, path, false)
}

// AttachReadOnly is Attach with a read-only loop device, which guarantees
// that nothing (not even a mount's log replay) can change the image.
func AttachReadOnly(tb testing.TB, path string) string {
	tb.Helper()
	RequireInterop(tb)
	return attach(tb, path, true)
}

// attach runs `losetup --find --show`, which picks and binds a free device
// in a way that is safe against other processes doing the same (util-linux
// retries when another process wins the race for a device).
func attach(tb testing.TB, path string, readOnly bool) string {
	tb.Helper()
	abs, err := filepath.Abs(path)
	if err != nil {
		tb.Fatal(err)
	}
	args := []string{"--find", "--show"}
	if readOnly {
		args = append(args, "--read-only")
	}
	var out, backing string
	for try := 0; ; try++ {
		out = strings.TrimSpace(mustRun(tb, "losetup", append(args, abs)...))
		if !strings.HasPrefix(out, "/dev/loop") || strings.ContainsAny(out, " \n") {
			tb.Fatalf("losetup printed %q, want a /dev/loopN path", out)
		}
		// Another process racing for the same free device can end up
		// owning it: then the device serves its file, not ours, and a
		// mount would show that filesystem. Leave it to its owner.
		if backing = backingFile(out); backing == abs {
			flushBuffers(out)
			break
		}
		if try == 4 {
			tb.Fatalf("losetup %s: %s serves %q", abs, out, backing)
		}
	}
	st := &loopState{backing: backing}
	loops.Lock()
	loops.m[out] = st
	loops.Unlock()
	tb.Cleanup(func() { detachIfOurs(tb, out) })
	return out
}

// backingFile reads the kernel's record of a loop device's backing file ("" if
// the device is not bound).
func backingFile(dev string) string {
	b, err := os.ReadFile(filepath.Join("/sys/block", filepath.Base(dev), "loop", "backing_file"))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// Detach detaches a loop device returned by Attach before the test ends,
// e.g. to hand the image file to a reader. Detaching twice is harmless.
func Detach(tb testing.TB, dev string) {
	tb.Helper()
	loops.Lock()
	_, ok := loops.m[dev]
	loops.Unlock()
	if !ok {
		tb.Fatalf("Detach(%s): not a loop device attached by btrfstest", dev)
	}
	detachIfOurs(tb, dev)
}

// detachIfOurs detaches dev if this package attached it and has not detached
// it yet. It first asks the kernel to forget the device (so no stale btrfs
// device registration points at a loop device another test may reuse), and
// refuses to touch a device whose backing file changed, because that would
// mean someone else owns it now. `losetup -d` on a still-busy device (after a
// lazy unmount) sets autoclear, so the kernel frees it when released.
func detachIfOurs(tb testing.TB, dev string) {
	tb.Helper()
	loops.Lock()
	st, ok := loops.m[dev]
	if !ok || st.detached {
		loops.Unlock()
		return
	}
	st.detached = true
	loops.Unlock()
	if cur := backingFile(dev); cur != st.backing {
		tb.Errorf("loop device %s: backing file is %q, attached %q; not detaching", dev, cur, st.backing)
		return
	}
	_, _ = runCmd("btrfs", "device", "scan", "--forget", dev)
	if _, err := runCmd("losetup", "-d", dev); err != nil {
		tb.Errorf("detach: %v", err)
	}
}
