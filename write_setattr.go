package btrfs

import (
	"io/fs"
	"strconv"
	"syscall"
	"time"

	"github.com/gobtrfs/btrfs/internal/disk"
)

// AttrChange is what SetattrInode changes, as one setattr(2)-like call:
// each field that is set. The zero value changes nothing but the change
// time.
type AttrChange struct {
	// UID and GID are the new owner and group, -1 to keep (as Chown).
	UID, GID int
	// SetMode makes Mode (permission, set-id and sticky bits) the new
	// mode, as Chmod.
	SetMode bool
	Mode    fs.FileMode
	// Atime and Mtime, when not nil, are the new access and
	// modification times; the other is kept (as Chtimes with it).
	Atime, Mtime *time.Time
	// KillSUIDGID clears the set-user-ID bit of anything but a
	// directory, and its set-group-ID bit when the group may execute,
	// as Linux does on a write or truncate by a process without
	// CAP_FSETID, before a mode given with it is set. When it is all
	// the call asks and neither bit is set, nothing changes.
	KillSUIDGID bool
}

// SetattrInode changes the owner, mode and times of inode ino of
// subvolume subvol, found by number (see StatInode), in one change, and
// returns the inode as the change left it. Each part is what Chown, Chmod
// and Chtimes do by path, in that order (so a change of owner clears the
// set-user-ID bit before a mode given with it is set); the change time
// becomes now. An inode that is gone is fs.ErrNotExist.
//
// It is a FUSE setattr's path: the request knows the inode, not a path,
// and its reply carries the attributes; reading them back after the
// change would cost a search of the trees the change just copied.
func (fsys *FS) SetattrInode(subvol, ino uint64, a AttrChange) (*Stat, error) {
	sv, id := disk.ObjectID(subvol), disk.ObjectID(ino)
	name := strconv.FormatUint(ino, 10)
	if !sv.IsFSTree() {
		return nil, &fs.PathError{Op: "setattr", Path: name, Err: syscall.EINVAL}
	}
	var st *Stat
	err := fsys.changeKeyed("setattr", name, &dirKey{tree: sv, ino: id}, func(c *wctx) (bool, error) {
		in, err := c.inodeByIno(sv, id)
		if err == nil {
			err = notPinned(in)
		}
		if err != nil {
			return false, err
		}
		if !validID(a.UID) || !validID(a.GID) {
			return false, syscall.EINVAL
		}
		if a == (AttrChange{UID: -1, GID: -1, KillSUIDGID: true}) && !killsSUIDGID(&in.item) {
			st = itemStat(c.tr.Owner(), in.ino, &in.item)
			return false, nil
		}
		if a.UID != -1 || a.GID != -1 {
			if started, err := c.chown(in, a.UID, a.GID); err != nil {
				return started, err
			}
		}
		if a.KillSUIDGID && killsSUIDGID(&in.item) {
			in.item.Mode &^= disk.ModeSetUID | disk.ModeSetGID&killableSGID(&in.item)
		}
		if a.SetMode {
			in.item.Mode = in.item.Mode&disk.ModeTypeMask | UnixMode(a.Mode)&0o7777
		}
		if a.Atime != nil {
			in.item.ATime = disk.TimespecOf(*a.Atime)
		}
		if a.Mtime != nil {
			in.item.MTime = disk.TimespecOf(*a.Mtime)
		}
		c.touch(in, c.now(), false)
		if err := c.putInode(in); err != nil {
			return true, err
		}
		st = itemStat(c.tr.Owner(), in.ino, &in.item)
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	return st, nil
}

// inodeByIno loads inode ino of subvolume sv, of any type, into the
// change, switching to the subvolume's tree (read-only ones are EROFS).
// A missing inode is fs.ErrNotExist.
func (c *wctx) inodeByIno(sv, ino disk.ObjectID) (*winode, error) {
	c.tr = c.top
	if sv != c.top.Owner() {
		if err := c.enterTree(sv); err != nil {
			return nil, err
		}
	}
	if err := c.sharedTreeErr(sv); err != nil {
		return nil, err
	}
	in, err := c.findInode(ino)
	if err != nil {
		return nil, err
	}
	if in == nil {
		return nil, fs.ErrNotExist
	}
	return in, nil
}

// killsSUIDGID reports whether AttrChange.KillSUIDGID clears a bit of it.
func killsSUIDGID(it *disk.InodeItem) bool {
	return !it.IsDir() && it.Mode&(disk.ModeSetUID|disk.ModeSetGID&killableSGID(it)) != 0
}

// killableSGID is the set-group-ID bit when a write clears it (the group
// may execute: without that the bit means mandatory locking), else 0.
func killableSGID(it *disk.InodeItem) uint32 {
	if it.Mode&0o010 != 0 {
		return disk.ModeSetGID
	}
	return 0
}
