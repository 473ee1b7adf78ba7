package check

import (
	"sort"

	"github.com/gobtrfs/btrfs/internal/disk"
)

// nameKey is one name of one inode in one directory.
type nameKey struct {
	parent, child disk.ObjectID
	name          string
}

// nameRec gathers the three records of a name: the INODE_REF (or
// EXTREF) in the child, and the DIR_ITEM and DIR_INDEX in the parent.
type nameRec struct {
	ref      bool
	refIndex uint64
	dirItem  bool
	dirIndex bool
	index    uint64
	ftype    disk.FileType
	hasType  bool
}

// dirEntries handles a DIR_ITEM or DIR_INDEX item of directory r.
func (f *fsTree) dirEntries(r *inodeRec, k disk.Key, data []byte) {
	kk := k
	items, err := viewDirItems(data, f.dirBuf)
	f.dirBuf = items
	if err != nil {
		f.report(KindDirItem, f.t.id, 0, &kk, "root %d dir %d: bad dir item %v: %v", f.t.id, r.ino, k, err)
		return
	}
	if k.Type == disk.DirIndexKey && len(items) != 1 {
		f.report(KindDirItem, f.t.id, 0, &kk, "root %d dir %d: dir index %d holds %d entries", f.t.id, r.ino, k.Offset, len(items))
	}
	for _, d := range items {
		r.dirNames += uint64(len(d.Name))
		if k.Type == disk.DirIndexKey {
			f.addDirIndexName(r.ino, d.Name, k)
		}
		if k.Type == disk.DirItemKey && disk.NameHash(d.Name) != k.Offset {
			f.report(KindDirItem, f.t.id, 0, &kk, "root %d dir %d: name hash mismatch for %q: key offset %#x, hash %#x", f.t.id, r.ino, d.Name, k.Offset, disk.NameHash(d.Name))
		}
		if d.Location.Type == disk.RootItemKey {
			continue // a subvolume: ROOT_REF/ROOT_BACKREF back it (root refs phase)
		}
		if d.Location.Type != disk.InodeItemKey {
			f.report(KindDirItem, f.t.id, 0, &kk, "root %d dir %d: entry %q has location %v", f.t.id, r.ino, d.Name, d.Location)
			continue
		}
		if k.Type == disk.DirItemKey {
			f.addName(r.ino, d.Location.ObjectID, d.Name, nameDirItem, 0, d.Type)
		} else {
			f.addName(r.ino, d.Location.ObjectID, d.Name, nameDirIndex, k.Offset, d.Type)
		}
	}
}

// finish checks what needs the whole tree: names against refs and
// inodes, orphans, the root directory.
func (f *fsTree) finish() error {
	id := f.t.id
	f.modes.sort()
	if _, ok := f.modes.get(f.rootDir); !ok {
		f.emit(KindInode, id, 0, nil, "root %d root dir %d not found", id, f.rootDir)
	} else if m, _ := f.modes.get(f.rootDir); m != disk.FtDir {
		f.emit(KindInode, id, 0, nil, "root %d root dir %d is not a directory", id, f.rootDir)
	}
	for _, pp := range f.pending {
		if !f.orphans[pp.ino] {
			f.out = append(f.out, pp.p)
		}
	}
	if err := f.dupNames(); err != nil {
		return err
	}
	names := newNameCursor(mergeAll(f.allSorters(f.nameSorters, f.names)...))
	for {
		k, n, ok := names.name()
		if !ok {
			break
		}
		if k.child == f.rootDir && k.parent == f.rootDir && k.name == ".." {
			continue
		}
		if f.orphans[k.parent] || (f.orphans[k.child] && !n.dirItem && !n.dirIndex) {
			continue // being deleted
		}
		msg := func(what string) {
			f.emit(KindDirItem, id, 0, nil, "root %d inode %d errors: %s (parent %d name %q)", id, k.child, what, k.parent, k.name)
		}
		if n.ref {
			if !n.dirItem {
				msg("no dir item")
			}
			if !n.dirIndex {
				msg("no dir index")
			} else if n.index != n.refIndex {
				msg("dir index mismatch")
			}
		} else {
			if n.dirItem && n.dirIndex {
				msg("no inode ref")
			} else if n.dirItem {
				msg("no inode ref, dir item without dir index")
			} else {
				msg("no inode ref, dir index without dir item")
			}
		}
		mode, ok := f.modes.get(k.child)
		if !ok {
			if n.dirItem || n.dirIndex {
				msg("dir entry points to a missing inode")
			}
			continue
		}
		if pm, ok := f.modes.get(k.parent); !ok {
			msg("parent directory missing")
		} else if pm != disk.FtDir {
			msg("parent is not a directory")
		}
		if n.hasType && n.ftype.Base() != mode {
			msg("filetype mismatch")
		}
	}
	inos := make([]disk.ObjectID, 0)
	for ino := range f.zeroLinks {
		if !f.orphans[ino] {
			inos = append(inos, ino)
		}
	}
	sort.Slice(inos, func(i, j int) bool { return inos[i] < inos[j] })
	for _, ino := range inos {
		f.emit(KindInode, id, 0, nil, "root %d inode %d errors: nlink 0 without orphan item", id, ino)
	}
	return names.it.Err()
}
