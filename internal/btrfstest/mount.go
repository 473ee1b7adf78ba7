//go:build linux

package btrfstest

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// mountState is one Mount: what to unmount and which loop devices Mount
// attached itself (and therefore detaches after unmounting).
type mountState struct {
	dir   string
	devs  []string // block devices given to the kernel
	owned []string // loop devices Mount attached for image files
	lock  *fsidLock
	done  bool
}

var mounts = struct {
	sync.Mutex
	m map[string]*mountState
}{m: map[string]*mountState{}}

// msFlags maps the generic mount options, which mount(2) takes as flags
// rather than in the filesystem's option string.
var msFlags = map[string]uintptr{
	"ro":          unix.MS_RDONLY,
	"nosuid":      unix.MS_NOSUID,
	"nodev":       unix.MS_NODEV,
	"noexec":      unix.MS_NOEXEC,
	"sync":        unix.MS_SYNCHRONOUS,
	"dirsync":     unix.MS_DIRSYNC,
	"noatime":     unix.MS_NOATIME,
	"nodiratime":  unix.MS_NODIRATIME,
	"relatime":    unix.MS_RELATIME,
	"strictatime": unix.MS_STRICTATIME,
	"lazytime":    unix.MS_LAZYTIME,
}

// parseMountOptions splits a mount(8)-style option string into mount(2)
// flags and the btrfs option string.
func parseMountOptions(opts string) (uintptr, []string) {
	var flags uintptr
	var data []string
	for _, o := range strings.Split(opts, ",") {
		switch f, ok := msFlags[o]; {
		case o == "":
		case o == "rw":
			flags &^= unix.MS_RDONLY
		case ok:
			flags |= f
		default:
			data = append(data, o)
		}
	}
	return flags, data
}

// Mount mounts a btrfs filesystem on a new directory under tb.TempDir() and
// returns that directory. opts is a mount(8)-style option string ("" for
// defaults; "ro", "subvolid=5", "compress=zstd", ...). devs are block
// devices or image files; image files are attached to loop devices (read-only
// ones for "ro" mounts). For a multi-device filesystem each further device is
// passed as device=... so the kernel finds it without a global scan.
//
// tb.Cleanup unmounts (retrying while busy, then lazily) and detaches the
// loop devices Mount attached. Unmount does the same earlier.
//
// Only one filesystem with a given fsid is mounted at a time: a Mount of a
// copy of a filesystem another process has mounted waits for it to be
// unmounted, and one of a filesystem this process has mounted fails the
// test (see heldFSIDs for why).
func Mount(tb testing.TB, opts string, devs ...string) string {
	tb.Helper()
	RequireInterop(tb)
	if len(devs) == 0 {
		tb.Fatal("Mount: no devices")
	}
	flags, data := parseMountOptions(opts)
	st := &mountState{dir: tb.TempDir(), lock: lockFSID(tb, devs[0])}
	for _, d := range devs {
		if isRegular(d) {
			loop := attach(tb, d, flags&unix.MS_RDONLY != 0)
			st.owned = append(st.owned, loop)
			d = loop
		}
		st.devs = append(st.devs, d)
	}
	for _, d := range st.devs[1:] {
		data = append(data, "device="+d)
	}
	if err := mountRetry(st.devs, st.dir, flags, strings.Join(data, ",")); err != nil {
		detachAll(tb, st.owned)
		st.lock.release()
		tb.Fatalf("mount -t btrfs -o %q %s %s: %v%s", opts, strings.Join(st.devs, " "), st.dir, err, kernelLog())
	}
	mounts.Lock()
	mounts.m[st.dir] = st
	mounts.Unlock()
	tb.Cleanup(func() { unmount(tb, st) })
	return st.dir
}

// Unmount unmounts a directory returned by Mount before the test ends and
// detaches the loop devices Mount attached, so the image files are quiescent
// and can be read, checked or mounted again. The later cleanup then does
// nothing.
func Unmount(tb testing.TB, dir string) {
	tb.Helper()
	mounts.Lock()
	st, ok := mounts.m[dir]
	mounts.Unlock()
	if !ok {
		tb.Fatalf("Unmount(%s): not mounted by btrfstest.Mount", dir)
	}
	unmount(tb, st)
}

// unmountRetries and unmountDelay bound how long an unmount waits for a busy
// filesystem (e.g. a file a failed test left open) before going lazy.
const (
	unmountRetries = 50
	unmountDelay   = 100 * time.Millisecond
)

// unmount does the work of Unmount and of the cleanup, once per mount.
func unmount(tb testing.TB, st *mountState) {
	tb.Helper()
	mounts.Lock()
	if st.done {
		mounts.Unlock()
		return
	}
	st.done = true
	delete(mounts.m, st.dir)
	mounts.Unlock()
	var err error
	for range unmountRetries {
		if err = unix.Unmount(st.dir, 0); !errors.Is(err, unix.EBUSY) {
			break
		}
		time.Sleep(unmountDelay)
	}
	if errors.Is(err, unix.EBUSY) {
		tb.Logf("unmount %s: still busy after %v, detaching lazily", st.dir, unmountRetries*unmountDelay)
		err = unix.Unmount(st.dir, unix.MNT_DETACH)
	}
	if err != nil {
		tb.Errorf("unmount %s: %v", st.dir, err)
	}
	detachAll(tb, st.owned)
	st.lock.release()
}

// kernelLog returns the recent btrfs kernel messages, which explain most
// mount failures, or "" when dmesg is unavailable.
func kernelLog() string {
	out, err := runCmd("dmesg")
	if err != nil {
		return ""
	}
	var keep []string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(strings.ToLower(l), "btrfs") {
			keep = append(keep, l)
		}
	}
	if len(keep) > 20 {
		keep = keep[len(keep)-20:]
	}
	if len(keep) == 0 {
		return ""
	}
	return fmt.Sprintf("\nrecent kernel messages:\n%s", strings.Join(keep, "\n"))
}

// mountRetry mounts, retrying a few times when the kernel reports a device
// of a multi-device filesystem missing (ENOENT, or EINVAL from mount(2)) or
// the filesystem busy (EEXIST): other test processes attach, scan and detach loop devices at
// the same time, and the kernel's list of known btrfs devices is global, so
// a registration can be lost between the scan that mount's device= options
// make and the mount itself. Each retry registers the devices again.
func mountRetry(devs []string, dir string, flags uintptr, data string) error {
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		if err = unix.Mount(devs[0], dir, "btrfs", flags, data); err == nil {
			return nil
		}
		// A lost registration of a multi-device filesystem shows as EINVAL
		// from mount(2) (the kernel logs "devid N ... is missing").
		transient := errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EEXIST) ||
			(len(devs) > 1 && errors.Is(err, unix.EINVAL))
		if !transient {
			return err
		}
		if len(devs) > 1 {
			_, _ = runCmd("btrfs", append([]string{"device", "scan"}, devs...)...)
		}
		time.Sleep(time.Duration(100*(attempt+1)) * time.Millisecond)
	}
	return err
}

// flushBuffers drops the device's cached blocks (BLKFLSBUF), so nothing a
// previous user of the loop device left in its cache (a tree block of
// another image at the same offset) can be read for this image.
func flushBuffers(dev string) {
	f, err := os.Open(dev)
	if err != nil {
		return
	}
	defer f.Close()
	_ = unix.IoctlSetInt(int(f.Fd()), unix.BLKFLSBUF, 0)
}
