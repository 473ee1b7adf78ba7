package btrfs

import (
	"syscall"

	"github.com/gobtrfs/btrfs/internal/disk"
	"github.com/gobtrfs/btrfs/internal/txn"
)

// Writes through an open File address the file by its inode, as writes to
// an open file descriptor do: a rename of the file, or a new file at its
// old name, does not change which file they reach. Only a File opened
// from a writable FS (not a Subvolume view) takes writes.

// WriteAt writes p at offset off of the open regular file, as pwrite(2):
// like FS.WriteAt, but found by inode. A file removed meanwhile fails
// with fs.ErrNotExist.
func (f *File) WriteAt(p []byte, off int64) (int, error) {
	sv, ino := f.identity()
	// Checksums and compression are computed here, before the change
	// takes the FS lock, so writes to different files overlap them
	// (docs/design/0009): under the policy the file's last write met,
	// for a write of whole sectors (the prepared pieces only serve a
	// write with the alignment and policy they were made for).
	var pd *PreparedData
	if pol := f.pol.Load(); pol != nil && f.fsys.w != nil && pol.ss > 0 &&
		uint64(len(p)) >= pol.ss && uint64(off)%pol.ss == 0 && uint64(len(p))%pol.ss == 0 {
		pd, _ = f.fsys.prepareWith(p, *pol) // on error, the change does it all
	}
	var after dataPolicy
	n, err := f.fsys.writeAtFound(f.name, &dirKey{tree: sv, ino: ino}, func(c *wctx) (*winode, error) { return c.regularByIno(sv, ino) }, p, off, pd, &after)
	if err == nil && after.ss > 0 {
		f.pol.Store(&after)
	}
	return n, err
}

// WritePiece is one write of File.WriteAtMany: Data at offset Off.
type WritePiece struct {
	Off  int64
	Data []byte
}

// WriteAtMany writes each piece at its offset, in the order given (a later
// piece overlapping an earlier one wins), as one change: other readers see
// all of them or none, and the file's time stamps move once. It costs one
// change of the filesystem instead of one per piece, which is what a
// caller holding many small writes of one file wants (the FUSE mount's
// write gathering). It fails before changing anything when a piece's
// offset is negative, when the space for all of them is not there, or
// when the file refuses writes (immutable, or append-only and a piece not
// at the end).
func (f *File) WriteAtMany(pieces []WritePiece) error {
	sv, ino := f.identity()
	var total uint64
	for _, pc := range pieces {
		if pc.Off < 0 || pc.Off+int64(len(pc.Data)) < pc.Off {
			return f.pathErr("write", syscall.EINVAL)
		}
		total += uint64(len(pc.Data))
	}
	if total == 0 {
		return nil
	}
	// Checksums (and compression) ahead of the lock, as WriteAt.
	pds := make([]*PreparedData, len(pieces))
	if pol := f.pol.Load(); pol != nil && f.fsys.w != nil && pol.ss > 0 {
		for i, pc := range pieces {
			if uint64(len(pc.Data)) >= pol.ss && uint64(pc.Off)%pol.ss == 0 && uint64(len(pc.Data))%pol.ss == 0 {
				pds[i], _ = f.fsys.prepareWith(pc.Data, *pol)
			}
		}
	}
	var after dataPolicy
	fsys := f.fsys
	err := fsys.dataChangeFound("write", f.name, &dirKey{tree: sv, ino: ino}, func(c *wctx, t *txn.Txn) (bool, error) {
		in, err := c.regularByIno(sv, ino)
		if err != nil {
			return false, err
		}
		// Every refusal before the first piece changes anything.
		size := int64(in.item.Size)
		for _, pc := range pieces {
			if err := mayChangeAt(in, pc.Off, size); err != nil {
				return false, err
			}
			size = max(size, pc.Off+int64(len(pc.Data)))
		}
		if err := c.checkDataSpace(total); err != nil {
			return false, err
		}
		for i, pc := range pieces {
			if err := c.write(in, pc.Data, uint64(pc.Off), pds[i]); err != nil {
				return true, err
			}
		}
		after, _ = fsys.policy(in)
		c.touch(in, c.now(), true)
		c.logFile = &dirKey{tree: c.tr.Owner(), ino: in.ino}
		return true, c.putInode(in)
	})
	if err == nil && after.ss > 0 {
		f.pol.Store(&after)
	}
	return err
}

// Truncate sets the size of the open regular file, as ftruncate(2): like
// FS.Truncate, but found by inode.
func (f *File) Truncate(size int64) error {
	if size < 0 {
		return f.pathErr("truncate", syscall.EINVAL)
	}
	sv, ino := f.identity()
	return f.fsys.truncateFound(f.name, &dirKey{tree: sv, ino: ino}, func(c *wctx) (*winode, error) { return c.regularByIno(sv, ino) }, size)
}

// identity is the subvolume and inode number the File is open on; they
// never change while it is open.
func (f *File) identity() (disk.ObjectID, disk.ObjectID) {
	in := f.st.Load().in
	return in.sv.id, in.ino
}

// regularByIno loads regular file ino of subvolume sv into the change,
// switching to the subvolume's tree (read-only ones are EROFS).
func (c *wctx) regularByIno(sv, ino disk.ObjectID) (*winode, error) {
	in, err := c.inodeByIno(sv, ino)
	if err != nil {
		return nil, err
	}
	return in, checkRegular(in)
}
