package mkfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"syscall"
	"time"

	"github.com/gobtrfs/btrfs"
)

// writeOptions are the btrfs.Options Build opens the new image with:
// compression and, for reproducible builds, a fixed clock for the change
// and creation times the write path stamps.
func writeOptions(o *BuildOptions, now func() time.Time) *btrfs.Options {
	bo := &btrfs.Options{Compress: o.Compress, CompressLevel: o.CompressLevel}
	if o.Reproducible {
		bo.Now = now
	}
	return bo
}

// apply creates one entry (hardlinks are remembered for later) and sets
// its attributes.
func (f *filler) apply(e *Entry) error {
	p := e.Path
	if e.Kind == KindDir {
		return f.applyDir(e)
	}
	if err := f.parents(p); err != nil {
		return err
	}
	if _, isDir := f.dirs[p]; isDir {
		return inputErr(p, "a %s where a directory was made before", e.Kind)
	}
	if err := f.replace(p, e.Kind); err != nil {
		return err
	}
	var err error
	permDone := false
	switch e.Kind {
	case KindHardlink:
		f.links = append(f.links, [2]string{e.LinkOf, p})
		return nil
	case KindFile:
		permDone, err = f.writeFile(e)
	case KindSymlink:
		err = f.fsys.SymlinkWith(e.Target, p, exact())
	default:
		err = f.mknod(e)
	}
	if err != nil {
		return err
	}
	return f.attrs(e, permDone)
}

// applyDir makes a directory, or updates one made as an implied parent.
func (f *filler) applyDir(e *Entry) error {
	p := e.Path
	d, ok := f.dirs[p]
	switch {
	case ok && d.explicit:
		return inputErr(p, "directory listed twice")
	case !ok:
		if err := f.parents(p); err != nil {
			return err
		}
		d = &dirState{}
		if err := f.mkdir(p, 0o700); err != nil {
			if !f.copying || !errors.Is(err, fs.ErrExist) || !f.isDir(p) {
				return err
			}
			d.existed = true
		}
		f.dirs[p] = d
	}
	d.explicit = true
	d.atime, d.mtime = f.times(e)
	return f.attrs(e, false)
}

// writeFile creates a regular file and writes its segments, leaving the
// gaps as holes. A segment is written in pieces of at most CommitBytes
// with a commit check between them, so one huge file does not make one
// huge transaction.
//
// When nothing after it can change the mode (no owner to set, no set-id
// bits that a chown or write would clear), the file is made with its
// final mode at once and permDone says so, which spares a change per file.
func (f *filler) writeFile(e *Entry) (permDone bool, err error) {
	p := e.Path
	create := uint32(0o600)
	if perm := f.perm(e); perm&0o6000 == 0 && f.owner(e) == (Owner{}) {
		create, permDone = perm, true
	}
	if err := f.fsys.CreateEmptyWith(p, btrfs.FileModeOf(create), exact()); err != nil {
		return false, err
	}
	if err := f.applyFlags(p); err != nil {
		return false, err
	}
	return permDone, f.writeData(e)
}

// writeData writes a new file's segments, leaving the gaps as holes.
func (f *filler) writeData(e *Entry) error {
	p := e.Path
	if e.Size == 0 {
		return nil
	}
	var end int64
	if f.opts.Reflink && e.host != nil && e.prepared == nil && len(e.Segments) > 0 {
		var err error
		if end, err = f.writeShared(e); err != nil {
			return err
		}
	} else if pd := e.prepared; pd != nil {
		// The prefetcher prepares only a whole single segment from 0.
		n, err := f.fsys.WritePrepared(p, pd, 0)
		if err != nil {
			return err
		}
		end = e.Segments[0].Len
		if err := f.maybeCommit(0, int64(n)); err != nil {
			return err
		}
	} else if len(e.Segments) > 0 {
		r, err := e.Open()
		if err != nil {
			return fmt.Errorf("%q: %w", p, err)
		}
		defer r.Close()
		for _, s := range e.Segments {
			for off := s.Off; off < s.Off+s.Len; {
				want := min(s.Off+s.Len-off, f.commitBytes())
				n, err := f.writePiece(p, r, off, want)
				if err != nil {
					return err
				}
				if n != want {
					return fmt.Errorf("%q: data ended at offset %d, expected %d bytes more (file changed while read?)", p, off+n, s.Off+s.Len-off-n)
				}
				off += n
				if err := f.maybeCommit(0, n); err != nil {
					return err
				}
			}
			end = s.Off + s.Len
		}
	}
	if end < e.Size {
		return f.fsys.Truncate(p, e.Size)
	}
	return nil
}

// smallWrite is the largest piece written with one WriteAt from a buffer
// of its size; WriteFrom holds a buffer of 8 MiB per call, which costs
// more than the data for the many small files of a typical tree.
const smallWrite = 1 << 20

// writePiece writes want bytes of r at off of file p and returns how many
// it wrote (fewer only when r ended early).
func (f *filler) writePiece(p string, r io.Reader, off, want int64) (int64, error) {
	if want > smallWrite {
		return f.fsys.WriteFrom(p, io.LimitReader(r, want), off)
	}
	buf := make([]byte, want)
	n, err := io.ReadFull(r, buf)
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return 0, fmt.Errorf("%q: %w", p, err)
	}
	if n == 0 {
		return 0, nil
	}
	w, err := f.fsys.WriteAt(p, buf[:n], off)
	return int64(w), err
}

// mknod makes a fifo, socket or device node.
func (f *filler) mknod(e *Entry) error {
	var dev uint64
	if e.Kind == KindCharDev || e.Kind == KindBlockDev {
		dev = mkdev(e.DevMajor, e.DevMinor)
	}
	return f.fsys.MknodWith(e.Path, btrfs.FileModeOf(nodeTypes[e.Kind]|0o600), dev, exact())
}

// attrs sets owner, mode, xattrs and (for non-directories) times, in the
// order that keeps each: an owner change clears set-id bits on Linux, and
// file capabilities go with writes and owner changes.
func (f *filler) attrs(e *Entry, permDone bool) error {
	p := e.Path
	if o := f.owner(e); o != (Owner{}) {
		if err := f.chown(p, o.UID, o.GID); err != nil {
			return err
		}
	}
	if e.Kind != KindSymlink && !permDone {
		if err := f.fsys.Chmod(p, btrfs.FileModeOf(f.perm(e))); err != nil {
			return err
		}
	}
	for _, x := range e.Xattrs {
		err := f.fsys.Setxattr(p, x.Name, x.Value)
		if err != nil && strings.HasPrefix(x.Name, "btrfs.") && errors.Is(err, syscall.EINVAL) {
			// A property this inode cannot take here (compression on a
			// file --inode-flags made NODATACOW): the kernel refuses it
			// too, and mkfs.btrfs copies it unchecked. Dropped.
			continue
		}
		if err != nil {
			return fmt.Errorf("xattr %q: %w", x.Name, err)
		}
	}
	if e.Kind == KindDir {
		return nil
	}
	atime, mtime := f.times(e)
	return f.fsys.Chtimes(p, atime, mtime)
}

// owner is the owner e gets: its own, or the override.
func (f *filler) owner(e *Entry) Owner {
	if o := f.opts.Owner; o != nil {
		return *o
	}
	return Owner{UID: e.UID, GID: e.GID}
}

// perm is the permission, set-id and sticky bits e gets, after --chmod.
func (f *filler) perm(e *Entry) uint32 {
	if f.chmod != nil {
		return f.chmod(e.Kind, e.Perm) & 0o7777
	}
	return e.Perm
}

func (f *filler) chown(p string, uid, gid uint32) error {
	return f.fsys.Chown(p, int(uid), int(gid))
}
