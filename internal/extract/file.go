package extract

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"

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
			r.fail(name, dst, err)
		}
	}
	if !r.opts.NoXattrs {
		r.applyXattrs(name, dst)
	}
	if !isLink {
		if err := chmodHost(dst, st.Mode&0o7777); err != nil {
			r.fail(name, dst, fmt.Errorf("chmod: %w", err))
		}
	}
	if err := setTimes(dst, st.Atime, st.Mtime, isLink); err != nil {
		r.fail(name, dst, fmt.Errorf("set times: %w", err))
	}
}
