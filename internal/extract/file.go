package extract

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/gobtrfs/btrfs"
)

// copyRange writes the data ranges of [j.start, j.end) of a regular file
// into its output, leaving holes as holes, and returns the bytes copied.
func (r *runner) copyRange(j fileJob, buf []byte) (n int64, err error) {
	for off := j.start; off < j.end; {
		start, err := j.f.src.SeekDataAt(off)
		if errors.Is(err, syscall.ENXIO) || (err == nil && start >= j.end) {
			break
		}
		if err != nil {
			return n, err
		}
		end, err := j.f.src.SeekHoleAt(start)
		if err != nil {
			return n, err
		}
		end = min(end, j.end)
		for pos := start; pos < end; {
			if r.ctx.Err() != nil {
				return n, r.ctx.Err()
			}
			chunk := buf[:min(int64(len(buf)), end-pos)]
			m, err := j.f.src.ReadAt(chunk, pos)
			if err != nil && !(err == io.EOF && m == len(chunk)) {
				return n, err
			}
			if _, err := j.f.out.WriteAt(chunk[:m], pos); err != nil {
				return n, err
			}
			pos += int64(m)
			n += int64(m)
		}
		off = end
	}
	return n, nil
}

// applyMeta sets owner, xattrs, mode and times of an extracted entry, in
// that order: chown clears setuid bits and xattrs can carry ACLs that a
// later chmod must not undo.
func (r *runner) applyMeta(name, dst string, st *btrfs.Stat, isDir bool) {
	isLink := st.Mode&0o170000 == 0o120000
	if r.owner {
		if err := os.Lchown(dst, int(st.UID), int(st.GID)); err != nil {
			r.fail(name, err)
		}
	}
	if !r.opts.NoXattrs {
		r.applyXattrs(name, dst)
	}
	if !isLink {
		if err := unix.Chmod(dst, st.Mode&0o7777); err != nil {
			r.fail(name, fmt.Errorf("chmod: %w", err))
		}
	}
	ts := []unix.Timespec{unix.NsecToTimespec(st.Atime.UnixNano()), unix.NsecToTimespec(st.Mtime.UnixNano())}
	if err := unix.UtimesNanoAt(unix.AT_FDCWD, dst, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		r.fail(name, fmt.Errorf("set times: %w", err))
	}
}

func (r *runner) applyXattrs(name, dst string) {
	xs, err := r.fsys.Xattrs(name)
	if err != nil {
		r.fail(name, err)
		return
	}
	for _, x := range xs {
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
			r.fail(name, fmt.Errorf("set xattr %s: %w", x.Name, err))
		}
	}
}
