//go:build unix

package cli

import (
	"time"

	"golang.org/x/sys/unix"
)

// chmodHost sets all mode bits (07777), which os.Chmod would not pass
// through unchanged.
func chmodHost(p string, mode uint32) error { return unix.Chmod(p, mode) }

// touchHost sets atime and mtime of p to t without following a symlink.
func touchHost(p string, t time.Time, _ bool) error {
	ts := unix.NsecToTimespec(t.UnixNano())
	return unix.UtimesNanoAt(unix.AT_FDCWD, p, []unix.Timespec{ts, ts}, unix.AT_SYMLINK_NOFOLLOW)
}
