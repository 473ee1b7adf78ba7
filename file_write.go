package btrfs

import (
	"syscall"

	"github.com/gobtrfs/btrfs/internal/disk"
)

// Writes through an open File address the file by its inode, as writes to
// an open file descriptor do: a rename of the file, or a new file at its
// old name, does not change which file they reach. Only a File opened
// from a writable FS (not a Subvolume view) takes writes.

// WriteAt writes p at offset off of the open regular file, as pwrite(2):
// like FS.WriteAt, but found by inode. A file removed meanwhile fails
// with fs.ErrNotExist.
func (f *File) WriteAt(p []byte, off int64) (int, error) {
	if err := f.WriteAtMany([]WritePiece{{Off: off, Data: p}}); err != nil {
		return 0, err
	}
	return len(p), nil
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
	// Checksums and compression are computed here, before the change
	// takes the FS lock, so writes to different files overlap them
	// (docs/design/0009): under the policy the file's last write met,
	// for pieces of whole sectors (the prepared pieces only serve a
	// write with the alignment and policy they were made for). On an
	// error the change does it all.
	pds := make([]*PreparedData, len(pieces))
	if pol := f.pol.Load(); pol != nil && f.fsys.w != nil && pol.ss > 0 {
		for i, pc := range pieces {
			if n := uint64(len(pc.Data)); n >= pol.ss && pc.Off >= 0 && uint64(pc.Off)%pol.ss == 0 && n%pol.ss == 0 {
				pds[i], _ = f.fsys.prepareWith(pc.Data, *pol)
			}
		}
	}
	var after dataPolicy
	err := f.fsys.writePiecesFound(f.name, &dirKey{tree: sv, ino: ino}, func(c *wctx) (*winode, error) { return c.regularByIno(sv, ino) }, pieces, pds, &after)
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
