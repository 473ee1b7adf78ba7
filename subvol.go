package btrfs

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"time"

	"github.com/gobtrfs/btrfs/internal/disk"
)

// SubvolumeInfo describes one subvolume or snapshot.
type SubvolumeInfo struct {
	// ID is the subvolume's tree id; ParentID the subvolume holding its
	// directory entry (5 for the top level).
	ID, ParentID uint64
	// Path is where it sits, relative to the top-level subvolume.
	Path string
	// Generation is the root item's generation, as `btrfs subvolume
	// list` prints it.
	Generation uint64
	// CTransID and OTransID are the last change and creation transactions.
	CTransID, OTransID uint64
	// UUID, ParentUUID (the snapshot source) and ReceivedUUID.
	UUID, ParentUUID, ReceivedUUID string
	// ReadOnly is set on read-only subvolumes and snapshots.
	ReadOnly bool
	// Ctime and Otime are the last change and creation times.
	Ctime, Otime time.Time
	// STransID, Stime, RTransID and Rtime are the send and receive
	// transactions and times (zero unless received).
	STransID, RTransID uint64
	Stime, Rtime       time.Time
}

// Subvolumes lists every subvolume and snapshot except the top level, in id
// order, with its path from the top level. Subvolumes being deleted (no
// back reference left) are omitted, as btrfs-progs does.
func (fsys *FS) Subvolumes() ([]SubvolumeInfo, error) {
	fsys, done := fsys.reader()
	defer done()
	c := fsys.cursor(fsys.rootTree)
	var out []SubvolumeInfo
	ok, err := c.Seek(disk.Key{ObjectID: disk.FirstFreeObjectID, Type: disk.RootItemKey})
	for ; ok && err == nil; ok, err = c.Next() {
		k := c.Key()
		if k.ObjectID > disk.LastFreeObjectID {
			break
		}
		if k.Type != disk.RootItemKey {
			continue
		}
		info, found, ierr := fsys.subvolumeInfo(k.ObjectID)
		if errors.Is(ierr, errNoRoot) {
			// The root tree lists this ROOT_ITEM (or a parent's back
			// reference names one) that a search cannot find: its keys
			// are damaged.
			return out, &disk.CorruptError{Logical: c.Leaf().Bytenr(), Tree: disk.RootTreeObjectID, Key: &k,
				What: "root tree lists a subvolume that a search does not find", Err: ierr}
		}
		if ierr != nil {
			return out, ierr
		}
		if found {
			out = append(out, *info)
		}
	}
	return out, err
}

// subvolumeInfo builds the info of one subvolume; found is false for a
// subvolume without a back reference (deleted, awaiting cleanup).
func (fsys *FS) subvolumeInfo(id disk.ObjectID) (*SubvolumeInfo, bool, error) {
	item, err := fsys.rootItem(id)
	if err != nil {
		return nil, false, err
	}
	info := &SubvolumeInfo{ID: uint64(id), Generation: uint64(item.Generation),
		CTransID: uint64(item.CTransID), OTransID: uint64(item.OTransID),
		UUID: item.UUID.String(), ParentUUID: item.ParentUUID.String(), ReceivedUUID: item.ReceivedUUID.String(),
		ReadOnly: item.Flags&disk.RootSubvolReadonly != 0, Ctime: item.CTime.Time(), Otime: item.OTime.Time(),
		STransID: uint64(item.STransID), RTransID: uint64(item.RTransID), Stime: item.STime.Time(), Rtime: item.RTime.Time()}
	p, parent, found, err := fsys.subvolPath(id, 0)
	if err != nil || !found {
		return nil, false, err
	}
	info.Path, info.ParentID = p, uint64(parent)
	return info, true, nil
}

// subvolPath returns the path of subvolume id from the top level and its
// parent id, following ROOT_BACKREF items upward.
func (fsys *FS) subvolPath(id disk.ObjectID, depth int) (string, disk.ObjectID, bool, error) {
	if id == disk.FSTreeObjectID {
		return "", 0, true, nil
	}
	if depth > 1000 {
		return "", 0, false, disk.Corruptf("subvolume %d: back references loop", id)
	}
	c := fsys.cursor(fsys.rootTree)
	ok, err := c.Seek(disk.Key{ObjectID: id, Type: disk.RootBackrefKey})
	if err != nil || !ok || c.Key().ObjectID != id || c.Key().Type != disk.RootBackrefKey {
		return "", 0, false, err
	}
	k := c.Key()
	parent := disk.ObjectID(k.Offset)
	var ref disk.RootRef
	if err := ref.Decode(c.Data()); err != nil {
		return "", 0, false, &disk.CorruptError{Logical: c.Leaf().Bytenr(), Tree: disk.RootTreeObjectID, Key: &k, What: "root backref", Err: err}
	}
	psv, err := fsys.subvolume(parent)
	if err != nil {
		return "", 0, false, err
	}
	dir, err := fsys.inodePath(psv, ref.DirID)
	if err != nil {
		return "", 0, false, err
	}
	ppath, _, found, err := fsys.subvolPath(parent, depth+1)
	if err != nil || !found {
		return "", 0, found, err
	}
	return path.Join(ppath, dir, string(ref.Name)), parent, true, nil
}

// inodePath returns the path of directory ino inside sv, from sv's root
// directory, following the first INODE_REF of each directory upward.
func (fsys *FS) inodePath(sv *subvol, ino disk.ObjectID) (string, error) {
	var parts []string
	for ino != sv.dirID {
		if len(parts) > 4096 {
			return "", disk.Corruptf("tree %d: inode %d: parent references loop", sv.id, ino)
		}
		c := fsys.cursor(sv.root)
		k := disk.Key{ObjectID: ino, Type: disk.InodeRefKey}
		ok, err := c.Seek(k)
		if err != nil {
			return "", err
		}
		if !ok || c.Key().ObjectID != ino || c.Key().Type != disk.InodeRefKey {
			return "", &disk.CorruptError{Tree: sv.id, Key: &k, What: "directory without inode ref"}
		}
		refs, err := disk.ParseInodeRefs(c.Data())
		if err != nil || len(refs) == 0 {
			kk := c.Key()
			return "", &disk.CorruptError{Tree: sv.id, Key: &kk, What: "inode ref", Err: err}
		}
		parts = append(parts, string(refs[0].Name))
		ino = disk.ObjectID(c.Key().Offset)
	}
	for i, j := 0, len(parts)-1; i < j; i, j = i+1, j-1 {
		parts[i], parts[j] = parts[j], parts[i]
	}
	return path.Join(parts...), nil
}

// DefaultSubvolume returns the id of the default subvolume, the one the
// kernel mounts when no subvol option is given (5 unless set-default
// changed it).
func (fsys *FS) DefaultSubvolume() (uint64, error) {
	fsys, done := fsys.reader()
	defer done()
	return fsys.defaultSubvolume()
}

// defaultSubvolume is DefaultSubvolume with the read lock held.
func (fsys *FS) defaultSubvolume() (uint64, error) {
	name := []byte("default")
	k := disk.Key{ObjectID: disk.RootTreeDirObjectID, Type: disk.DirItemKey, Offset: disk.NameHash(name)}
	data, ok, err := fsys.lookupItem(fsys.rootTree, k)
	if err != nil || !ok {
		return uint64(disk.FSTreeObjectID), err
	}
	items, err := disk.ParseDirItems(data)
	if err != nil {
		return 0, &disk.CorruptError{Tree: disk.RootTreeObjectID, Key: &k, What: "default dir item", Err: err}
	}
	for _, it := range items {
		if string(it.Name) == "default" {
			return uint64(it.Location.ObjectID), nil
		}
	}
	return uint64(disk.FSTreeObjectID), nil
}

// Subvolume returns a view of the filesystem rooted at subvolume id, sharing
// fsys' devices and caches. Closing the view does nothing; close fsys.
func (fsys *FS) Subvolume(id uint64) (*FS, error) {
	r, done := fsys.reader()
	defer done()
	sv, err := r.subvolume(disk.ObjectID(id))
	if err != nil {
		return nil, fmt.Errorf("subvolume %d: %w", id, err)
	}
	if !disk.ObjectID(id).IsFSTree() {
		return nil, fmt.Errorf("tree %d is not a subvolume", id)
	}
	// The view shares the write side (its reads take the published views
	// of the same running transaction, FS.reader) but refuses changes
	// (view is set).
	return &FS{volume: fsys.volume, top: sv, view: true, w: fsys.w}, nil
}

// SubvolumeAt returns the id of the subvolume whose root directory is the
// named path (following symlinks), or an error if the path is not one.
func (fsys *FS) SubvolumeAt(name string) (uint64, error) {
	fsys, done := fsys.reader()
	defer done()
	in, err := fsys.walk("subvolume", name, true)
	if err != nil {
		return 0, err
	}
	if in.ino != in.sv.dirID {
		return 0, &fs.PathError{Op: "subvolume", Path: name, Err: fmt.Errorf("not a subvolume")}
	}
	return uint64(in.sv.id), nil
}
