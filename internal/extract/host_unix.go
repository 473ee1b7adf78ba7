//go:build unix

package extract

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// checkHostName accepts every btrfs name: they never contain '/' or NUL,
// the only bytes a Unix name cannot hold.
func checkHostName(string) error { return nil }

// chmodHost sets all mode bits (07777), set-id and sticky included, which
// os.Chmod would not pass through unchanged.
func chmodHost(dst string, mode uint32) error { return unix.Chmod(dst, mode) }

// setTimes sets nanosecond atime and mtime without following a symlink.
func setTimes(dst string, atime, mtime time.Time, _ bool) error {
	ts := []unix.Timespec{unix.NsecToTimespec(atime.UnixNano()), unix.NsecToTimespec(mtime.UnixNano())}
	return unix.UtimesNanoAt(unix.AT_FDCWD, dst, ts, unix.AT_SYMLINK_NOFOLLOW)
}

func (r *runner) applyXattrs(name, dst string) {
	xs, err := r.fsys.Xattrs(name)
	if err != nil {
		r.fail(name, dst, err)
		return
	}
	for _, x := range xs {
		// Off Linux only user. attributes mean the same thing (the
		// system. and security. ones are Linux formats, such as POSIX
		// ACLs, another kernel would store as raw bytes or refuse).
		if runtime.GOOS != "linux" && !strings.HasPrefix(x.Name, "user.") {
			r.skip(name, fmt.Errorf("xattr %s: only user. attributes are written on %s: %w", x.Name, runtime.GOOS, errors.ErrUnsupported))
			continue
		}
		if err := unix.Lsetxattr(dst, x.Name, x.Value, 0); err != nil {
			// btrfs.* attributes are btrfs properties (compression); only a
			// btrfs destination can hold them.
			if strings.HasPrefix(x.Name, "btrfs.") && errors.Is(err, unix.ENOTSUP) {
				continue
			}
			// Namespaces the host refuses to an unprivileged user (trusted.,
			// security.) are skipped, as cp -a does; anything else is reported.
			if !r.owner && (errors.Is(err, unix.EPERM) || errors.Is(err, unix.ENOTSUP)) {
				continue
			}
			r.fail(name, dst, fmt.Errorf("set xattr %s: %w", x.Name, err))
		}
	}
}
