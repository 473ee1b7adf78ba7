package btrfs

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"slices"

	"github.com/gobtrfs/btrfs/internal/ctree"
	"github.com/gobtrfs/btrfs/internal/disk"
	"github.com/gobtrfs/btrfs/internal/txn"
)

// Log replay (docs/design/0016-log-tree-replay.md). The kernel's fsync
// writes the changed items of an inode into a per-subvolume log tree
// instead of committing; a mount replays them into the subvolume trees.
// A writable open does the same, as its first change, through the one
// write path (a wctx in the first transaction), and commits it before
// anything else may change. What a logged item means:
//
//   - INODE_ITEM: the inode as fsync'd. It replaces the subvolume's
//     (nbytes, a directory's size and nlink are recounted at the end);
//     a regular file loses the extents past its logged size, and the
//     inode's xattrs become exactly the logged ones.
//   - DIR_LOG_INDEX (dir, DIR_LOG_INDEX, first) with end: the log holds
//     every entry of dir with an index in [first, end]; entries of the
//     subvolume in the range that the log lacks were removed. DIR_LOG_ITEM
//     is the same over DIR_ITEM name hashes (older kernels).
//   - DIR_INDEX: an entry of a logged directory, added where missing
//     (a different entry of the same name or index goes first).
//   - INODE_REF / INODE_EXTREF: the names of an inode in one parent; the
//     subvolume's names of the inode in that parent that the log lacks
//     go, the logged ones are added. Names in parents the log says
//     nothing about stay (so a rename whose old directory was not logged
//     leaves both names, as on Linux).
//   - EXTENT_DATA: the file's range the item covers is replaced by it,
//     with the extent references moved; the logged checksums of its disk
//     range (EXTENT_CSUM items of the log) go to the csum tree.
//
// Then every inode touched gets its nlink recounted from its names (an
// inode left without names is removed, as the kernel's orphan cleanup
// does), a directory its size from its entries, a file its nbytes from
// its extents.

// logItem is one item of a log tree.
type logItem struct {
	key  disk.Key
	data []byte
}

// replayLog replays the log trees found at open and commits, before the
// FS is handed out. Nothing happens without a log.
func (fsys *FS) replayLog() error {
	w := fsys.w
	trees := w.tfs.LogTrees()
	if len(trees) == 0 {
		return nil
	}
	if w.opts.NoLogReplay {
		return fmt.Errorf("%w: Options.NoLogReplay with a writable open (the commit would drop the log)", ErrUnsupported)
	}
	err := fsys.change("replay log", ".", func(c *wctx) (bool, error) {
		if err := c.t.ClaimLoggedData(); err != nil {
			return false, err
		}
		for _, lt := range trees {
			if err := c.replayLogTree(lt); err != nil {
				return true, fmt.Errorf("log tree of subvolume %d: %w", lt.Subvol, err)
			}
		}
		c.t.LogReplayed()
		return true, nil
	})
	if pe, ok := errors.AsType[*fs.PathError](err); ok {
		err = pe.Err // the path is ".", the op the caller's
	}
	if err != nil {
		return err
	}
	return fsys.Commit()
}

// logView is one log tree read into memory (logs are small: what fsync
// wrote since the last commit).
type logView struct {
	items []logItem
	// csums are the log's EXTENT_CSUM items, by start address.
	csums []logItem
}

// readLog reads all items of the log tree lt.
func (c *wctx) readLog(lt txn.LogTree) (*logView, error) {
	lv := &logView{}
	cur := ctree.NewCursor(c.t, lt.Root)
	ok, err := cur.Seek(disk.Key{})
	for ; ok && err == nil; ok, err = cur.Next() {
		it := logItem{key: cur.Key(), data: slices.Clone(cur.Data())}
		if it.key.ObjectID == disk.ExtentCsumObjectID && it.key.Type == disk.ExtentCsumKey {
			lv.csums = append(lv.csums, it)
			continue
		}
		switch it.key.Type {
		case disk.InodeItemKey, disk.InodeRefKey, disk.InodeExtrefKey, disk.XattrItemKey,
			disk.DirItemKey, disk.DirIndexKey, disk.DirLogItemKey, disk.DirLogIndexKey, disk.ExtentDataKey:
		default:
			return nil, fmt.Errorf("%w: log replay of item %v", ErrUnsupported, it.key)
		}
		lv.items = append(lv.items, it)
	}
	return lv, err
}

// of returns the logged items of object id with key type typ.
func (lv *logView) of(id disk.ObjectID, typ disk.KeyType) []logItem {
	var out []logItem
	for _, it := range lv.items {
		if it.key.ObjectID == id && it.key.Type == typ {
			out = append(out, it)
		}
	}
	return out
}

// ofType returns every logged item of key type typ.
func (lv *logView) ofType(typ disk.KeyType) []logItem {
	var out []logItem
	for _, it := range lv.items {
		if it.key.Type == typ {
			out = append(out, it)
		}
	}
	return out
}

// replayer is the replay of one log tree into its subvolume.
type replayer struct {
	c       *wctx
	lv      *logView
	touched map[disk.ObjectID]bool
	// ignored are the inodes logged with nlink 0, whose items are not
	// replayed.
	ignored map[disk.ObjectID]bool
}

// replayLogTree replays one log tree into its subvolume's tree.
func (c *wctx) replayLogTree(lt txn.LogTree) error {
	lv, err := c.readLog(lt)
	if err != nil {
		return err
	}
	tr, err := c.t.Tree(lt.Subvol)
	if errors.Is(err, txn.ErrNoTree) {
		return nil // the subvolume is gone: so is what was logged for it
	}
	if err != nil {
		return err
	}
	saved := c.tr
	c.tr = tr
	defer func() { c.tr = saved }()
	r := &replayer{c: c, lv: lv, touched: map[disk.ObjectID]bool{}, ignored: map[disk.ObjectID]bool{}}
	steps := []func() error{r.inodes, r.dirDeletes, r.dirEntries, r.refs, r.extents, r.fixups}
	for _, s := range steps {
		if err := s(); err != nil {
			return err
		}
	}
	return nil
}

// logCorrupt is the error for a damaged log item.
func logCorrupt(k disk.Key, what string, err error) error {
	return &disk.CorruptError{Tree: disk.TreeLogObjectID, Key: &k, What: what, Err: err}
}

// inodes replays the logged INODE_ITEMs and the xattrs of those inodes.
func (r *replayer) inodes() error {
	c := r.c
	for _, it := range r.lv.ofType(disk.InodeItemKey) {
		ino := it.key.ObjectID
		var li disk.InodeItem
		if err := li.Decode(it.data); err != nil {
			return logCorrupt(it.key, "logged inode item", err)
		}
		if li.NLink == 0 {
			// An inode fsync'd without names (a tmpfile, or one
			// unlinked while open): nothing of it is replayed.
			r.ignored[ino] = true
			continue
		}
		old, err := c.findInode(ino)
		if err != nil {
			return err
		}
		in := &winode{ino: ino, tr: c.tr, item: li}
		in.item.NBytes = 0
		switch {
		case old != nil && li.Generation == 0:
			// Logged only to say the inode exists (as part of its
			// directory's fsync): the subvolume's inode stays, but
			// for a regular file a logged size other than 0 is the
			// size as of the fsync.
			in.item = old.item
			if li.Mode&disk.ModeTypeMask == disk.ModeRegular && old.item.Mode&disk.ModeTypeMask == disk.ModeRegular && li.Size != 0 {
				in.item.Size = li.Size
			}
		case old != nil:
			in.item.NBytes = old.item.NBytes
		}
		if in.item.IsDir() {
			in.item.Size = 0 // recounted by fixups
		}
		if old != nil {
			if in.item.Mode&disk.ModeTypeMask == disk.ModeRegular {
				// Extents past the size were truncated away before
				// the fsync (or are preallocated ones the log has).
				if err := r.truncate(in, in.item.Size); err != nil {
					return err
				}
			}
			if err := c.putInode(in); err != nil {
				return err
			}
		} else {
			buf := make([]byte, disk.InodeItemSize)
			in.item.Encode(buf)
			if err := c.tr.InsertItem(c.tx, it.key, buf); err != nil {
				return err
			}
		}
		// The inode's xattrs are the logged ones.
		if _, err := c.tr.DeleteRange(c.tx, disk.Key{ObjectID: ino, Type: disk.XattrItemKey},
			disk.Key{ObjectID: ino, Type: disk.XattrItemKey, Offset: math.MaxUint64}); err != nil {
			return err
		}
		for _, x := range r.lv.of(ino, disk.XattrItemKey) {
			if _, err := disk.ParseDirItems(x.data); err != nil {
				return logCorrupt(x.key, "logged xattr item", err)
			}
			if err := c.tr.InsertItem(c.tx, x.key, x.data); err != nil {
				return err
			}
		}
		r.touched[ino] = true
	}
	return nil
}

// truncate drops the extents of in at and past size (rounded up to a
// sector).
func (r *replayer) truncate(in *winode, size uint64) error {
	c := r.c
	a := roundUpTo(size, uint64(c.t.SectorSize()))
	exts, err := c.fileExtents(in.ino, a, math.MaxUint64)
	if err != nil {
		return err
	}
	var del []extent
	for _, e := range exts {
		if e.start >= a {
			del = append(del, e)
		}
	}
	if len(del) == 0 {
		return nil
	}
	return c.apply(in, del, nil)
}

// dirDeletes removes the entries of logged directory ranges that the log
// lacks.
func (r *replayer) dirDeletes() error {
	c := r.c
	for _, typ := range []disk.KeyType{disk.DirLogIndexKey, disk.DirLogItemKey} {
		for _, it := range r.lv.ofType(typ) {
			var dl disk.DirLogItem
			if err := dl.Decode(it.data); err != nil {
				return logCorrupt(it.key, "dir log item", err)
			}
			dir := it.key.ObjectID
			entryType := disk.DirIndexKey
			if typ == disk.DirLogItemKey {
				entryType = disk.DirItemKey
			}
			from := disk.Key{ObjectID: dir, Type: entryType, Offset: it.key.Offset}
			to := disk.Key{ObjectID: dir, Type: entryType, Offset: dl.End}
			type gone struct {
				name   []byte
				target disk.ObjectID
			}
			var drop []gone
			err := c.tr.Range(c.tx, from, to, func(k disk.Key, data []byte) (bool, error) {
				entries, err := disk.ParseDirItems(data)
				if err != nil {
					return false, &disk.CorruptError{Tree: c.tr.Owner(), Key: &k, What: "dir entry", Err: err}
				}
				logged, _ := r.loggedEntries(k)
				for _, e := range entries {
					if !slices.ContainsFunc(logged, func(l disk.DirItem) bool {
						return bytes.Equal(l.Name, e.Name) && l.Location == e.Location
					}) {
						drop = append(drop, gone{slices.Clone(e.Name), e.Location.ObjectID})
						if e.Location.Type != disk.InodeItemKey {
							return false, fmt.Errorf("%w: log replay removes subvolume entry %q", ErrUnsupported, e.Name)
						}
					}
				}
				return true, nil
			})
			if err != nil {
				return err
			}
			for _, g := range drop {
				if err := r.unlinkName(dir, g.name, g.target); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// loggedEntries are the entries of the logged item with key k.
func (r *replayer) loggedEntries(k disk.Key) ([]disk.DirItem, error) {
	i, ok := slices.BinarySearchFunc(r.lv.items, k, func(it logItem, k disk.Key) int { return it.key.Compare(k) })
	if !ok {
		return nil, nil
	}
	entries, err := disk.ParseDirItems(r.lv.items[i].data)
	if err != nil {
		return nil, logCorrupt(k, "logged dir entry", err)
	}
	return entries, nil
}

// unlinkName removes the name of target in dir, if the subvolume has it:
// the DIR_ITEM entry, the DIR_INDEX item and the back-reference. The
// target's nlink is recounted by fixups.
func (r *replayer) unlinkName(dir disk.ObjectID, name []byte, target disk.ObjectID) error {
	c := r.c
	parent, err := c.findInode(dir)
	if err != nil || parent == nil {
		return err
	}
	ref, err := c.findBackref(target, dir, name)
	if err != nil {
		if errors.Is(err, disk.ErrCorrupt) {
			// No back-reference: drop the entries alone.
			return r.dropEntries(parent, name)
		}
		return err
	}
	if err := c.dropName(parent, string(name), ref); err != nil {
		return err
	}
	if err := c.putInode(parent); err != nil {
		return err
	}
	r.touched[dir], r.touched[target] = true, true
	return nil
}

// dropEntries removes the DIR_ITEM and DIR_INDEX entries called name of
// parent whose inode has no back-reference for them.
func (r *replayer) dropEntries(parent *winode, name []byte) error {
	c := r.c
	dk := disk.Key{ObjectID: parent.ino, Type: disk.DirItemKey, Offset: disk.NameHash(name)}
	if err := c.removeHashed(dk, name); err != nil {
		return err
	}
	var idx []uint64
	err := c.tr.Range(c.tx, disk.Key{ObjectID: parent.ino, Type: disk.DirIndexKey},
		disk.Key{ObjectID: parent.ino, Type: disk.DirIndexKey, Offset: math.MaxUint64}, func(k disk.Key, data []byte) (bool, error) {
			if es, err := disk.ParseDirItems(data); err == nil && len(es) == 1 && bytes.Equal(es[0].Name, name) {
				idx = append(idx, k.Offset)
			}
			return true, nil
		})
	if err != nil {
		return err
	}
	for _, i := range idx {
		if _, err := c.tr.DeleteItem(c.tx, disk.Key{ObjectID: parent.ino, Type: disk.DirIndexKey, Offset: i}); err != nil {
			return err
		}
	}
	r.touched[parent.ino] = true
	return nil
}

// dirEntries adds the logged DIR_INDEX entries the subvolume lacks.
func (r *replayer) dirEntries() error {
	c := r.c
	for _, it := range r.lv.ofType(disk.DirIndexKey) {
		entries, err := disk.ParseDirItems(it.data)
		if err != nil || len(entries) != 1 {
			return logCorrupt(it.key, "logged dir index", err)
		}
		e := entries[0]
		if e.Location.Type != disk.InodeItemKey {
			// An entry naming a subvolume: fine where the subvolume
			// tree has it already, else beyond what we replay.
			have, _, err := c.tr.Lookup(c.tx, it.key)
			if err != nil {
				return err
			}
			if hs, err := disk.ParseDirItems(have); err == nil && len(hs) == 1 &&
				bytes.Equal(hs[0].Name, e.Name) && hs[0].Location == e.Location {
				continue
			}
			return fmt.Errorf("%w: log replay of subvolume entry %q", ErrUnsupported, e.Name)
		}
		if err := r.link(it.key.ObjectID, e.Name, e.Location.ObjectID, it.key.Offset); err != nil {
			return err
		}
	}
	return nil
}

// link makes name in dir, at DIR_INDEX index, a name of target: an
// entry of that name for another inode, or of the same inode at another
// index, and another entry at index, go first. Names of inodes (or in
// directories) the subvolume does not have are skipped, as the kernel
// does.
func (r *replayer) link(dir disk.ObjectID, name []byte, target disk.ObjectID, index uint64) error {
	c := r.c
	parent, err := c.findInode(dir)
	if err != nil || parent == nil {
		return err
	}
	in, err := c.findInode(target)
	if err != nil || in == nil {
		return err
	}
	if !parent.item.IsDir() {
		return logCorrupt(disk.Key{ObjectID: dir, Type: disk.DirIndexKey, Offset: index}, "logged entry in a non-directory", nil)
	}
	if de, err := c.dirEntry(dir, string(name)); err != nil {
		return err
	} else if de != nil {
		if de.Location.ObjectID == target {
			if ref, err := c.findBackref(target, dir, name); err == nil && ref.index == index {
				return nil // already there
			}
		}
		if err := r.unlinkName(dir, name, de.Location.ObjectID); err != nil {
			return err
		}
	}
	ik := disk.Key{ObjectID: dir, Type: disk.DirIndexKey, Offset: index}
	if data, ok, err := c.tr.Lookup(c.tx, ik); err != nil {
		return err
	} else if ok {
		es, err := disk.ParseDirItems(data)
		if err != nil || len(es) != 1 {
			return &disk.CorruptError{Tree: c.tr.Owner(), Key: &ik, What: "dir index", Err: err}
		}
		if err := r.unlinkName(dir, es[0].Name, es[0].Location.ObjectID); err != nil {
			return err
		}
	}
	parent, err = c.inode(dir) // unlinkName may have rewritten it
	if err != nil {
		return err
	}
	extrefOK := c.fsys.features()&disk.IncompatExtendedIref != 0
	rk, err := c.planBackref(target, dir, name, extrefOK, 0)
	if err != nil {
		return err
	}
	if err := c.addName(parent, string(name), in, index, rk); err != nil {
		return err
	}
	if err := c.putInode(parent); err != nil {
		return err
	}
	r.touched[dir], r.touched[target] = true, true
	return nil
}

// loggedName is one name of an inode in a parent, from a logged ref.
type loggedName struct {
	parent disk.ObjectID
	name   []byte
	index  uint64
}

// refs replays the logged INODE_REF and INODE_EXTREF items, item by
// item: the subvolume's item of the same key loses the names the logged
// one lacks (they were removed before the fsync), and the logged names
// are added. Names in items the log does not have stay.
func (r *replayer) refs() error {
	c := r.c
	for _, it := range r.lv.items {
		if it.key.Type != disk.InodeRefKey && it.key.Type != disk.InodeExtrefKey || r.ignored[it.key.ObjectID] {
			continue
		}
		ino := it.key.ObjectID
		logged, err := refNames(it.key, it.data)
		if err != nil {
			return logCorrupt(it.key, "logged inode ref", err)
		}
		data, ok, err := c.tr.Lookup(c.tx, it.key)
		if err != nil {
			return err
		}
		if ok {
			have, err := refNames(it.key, data)
			if err != nil {
				return &disk.CorruptError{Tree: c.tr.Owner(), Key: &it.key, What: "inode ref", Err: err}
			}
			for _, h := range have {
				if h.parent == ino {
					continue
				}
				if !slices.ContainsFunc(logged, func(n loggedName) bool { return n.parent == h.parent && bytes.Equal(n.name, h.name) }) {
					if err := r.unlinkName(h.parent, h.name, ino); err != nil {
						return err
					}
				}
			}
		}
		for _, n := range logged {
			if n.parent == ino {
				continue // a subvolume's root directory's ".."
			}
			if err := r.link(n.parent, n.name, ino, n.index); err != nil {
				return err
			}
		}
		r.touched[ino] = true
	}
	return nil
}

// refNames decodes the names of an INODE_REF or INODE_EXTREF item.
func refNames(k disk.Key, data []byte) ([]loggedName, error) {
	var out []loggedName
	if k.Type == disk.InodeRefKey {
		refs, err := disk.ParseInodeRefs(data)
		for _, ref := range refs {
			out = append(out, loggedName{disk.ObjectID(k.Offset), slices.Clone(ref.Name), ref.Index})
		}
		return out, err
	}
	refs, err := disk.ParseInodeExtrefs(data)
	for _, ref := range refs {
		out = append(out, loggedName{ref.Parent, slices.Clone(ref.Name), ref.Index})
	}
	return out, err
}

// names returns every name of ino in the subvolume, from its INODE_REF
// and INODE_EXTREF items.
func (r *replayer) names(ino disk.ObjectID) ([]loggedName, error) {
	c := r.c
	var out []loggedName
	err := c.tr.Range(c.tx, disk.Key{ObjectID: ino, Type: disk.InodeRefKey},
		disk.Key{ObjectID: ino, Type: disk.InodeExtrefKey, Offset: math.MaxUint64}, func(k disk.Key, data []byte) (bool, error) {
			switch k.Type {
			case disk.InodeRefKey:
				refs, err := disk.ParseInodeRefs(data)
				if err != nil {
					return false, &disk.CorruptError{Tree: c.tr.Owner(), Key: &k, What: "inode ref", Err: err}
				}
				for _, ref := range refs {
					out = append(out, loggedName{disk.ObjectID(k.Offset), slices.Clone(ref.Name), ref.Index})
				}
			case disk.InodeExtrefKey:
				refs, err := disk.ParseInodeExtrefs(data)
				if err != nil {
					return false, &disk.CorruptError{Tree: c.tr.Owner(), Key: &k, What: "inode extref", Err: err}
				}
				for _, ref := range refs {
					out = append(out, loggedName{ref.Parent, slices.Clone(ref.Name), ref.Index})
				}
			}
			return true, nil
		})
	return out, err
}

// extents replays the logged EXTENT_DATA items and their checksums.
func (r *replayer) extents() error {
	c := r.c
	ss := uint64(c.t.SectorSize())
	var in *winode
	flush := func() error {
		if in == nil {
			return nil
		}
		err := c.putInode(in)
		in = nil
		return err
	}
	for _, it := range r.lv.ofType(disk.ExtentDataKey) {
		ino := it.key.ObjectID
		if r.ignored[ino] {
			continue
		}
		if in == nil || in.ino != ino {
			if err := flush(); err != nil {
				return err
			}
			var err error
			if in, err = c.findInode(ino); err != nil {
				return err
			}
			if in == nil {
				continue // an inode the log does not have either
			}
		}
		e, err := decodeExtent(disk.TreeLogObjectID, it.key, it.data, 0)
		if err != nil {
			return err
		}
		a, b := e.start, e.start+roundUpTo(e.length, ss)
		exts, err := c.fileExtents(ino, a, b)
		if err != nil {
			return err
		}
		var del, keep []extent
		for _, x := range exts {
			if x.fe.Type == disk.FileExtentInline {
				del = append(del, x) // inline data is never cut, only replaced
				continue
			}
			d, k := cutRange([]extent{x}, a, b)
			del, keep = append(del, d...), append(keep, k...)
		}
		if err := c.apply(in, del, mergeSorted(keep, []extent{e})); err != nil {
			return err
		}
		if err := r.csums(in, &e); err != nil {
			return err
		}
		r.touched[ino] = true
	}
	return flush()
}

// csums moves the logged checksums of e's data to the csum tree.
func (r *replayer) csums(in *winode, e *extent) error {
	if e.fe.Type == disk.FileExtentInline || e.fe.DiskBytenr == 0 || e.fe.Type == disk.FileExtentPrealloc {
		return nil
	}
	c := r.c
	lo, hi := uint64(e.fe.DiskBytenr), uint64(e.fe.DiskBytenr)+e.fe.DiskNumBytes
	if e.fe.Compression == disk.CompressNone {
		lo, hi = lo+e.fe.Offset, lo+e.fe.Offset+e.fe.NumBytes
	}
	ss := uint64(c.t.SectorSize())
	cs := uint64(c.t.CsumType().Size())
	lo, hi = roundDownTo(lo, ss), roundUpTo(hi, ss)
	type run struct {
		at   uint64
		sums []byte
	}
	var runs []run
	for _, it := range r.lv.csums {
		start := it.key.Offset
		if len(it.data)%int(cs) != 0 {
			return logCorrupt(it.key, "logged csum item size", nil)
		}
		end := start + uint64(len(it.data))/cs*ss
		a, b := max(start, lo), min(end, hi)
		if a >= b {
			continue
		}
		runs = append(runs, run{a, it.data[(a-start)/ss*cs : (b-start)/ss*cs]})
	}
	var covered uint64
	for _, rn := range runs {
		covered += uint64(len(rn.sums)) / cs * ss
	}
	if covered < hi-lo && in.item.Flags&disk.InodeNoDataSum == 0 && c.t.LoggedOnly(e.fe.DiskBytenr) {
		// Data written after the last commit whose checksums the
		// log lacks: the log is damaged (the kernel logs the sums of
		// every extent it logs), unless the csum tree has them
		// already (an extent the last commit's csum tree covers).
		if len(runs) == 0 {
			ok, err := c.t.CsumsCover(disk.LogicalAddr(lo), hi-lo)
			if err != nil {
				return err
			}
			if ok {
				return nil
			}
		}
		k := disk.Key{ObjectID: in.ino, Type: disk.ExtentDataKey, Offset: e.start}
		return logCorrupt(k, fmt.Sprintf("logged checksums cover %d of the %d bytes of data extent %d", covered, hi-lo, e.fe.DiskBytenr), nil)
	}
	if len(runs) == 0 {
		return nil
	}
	if err := c.t.DeleteCsums(disk.LogicalAddr(lo), hi-lo); err != nil {
		return err
	}
	for _, rn := range runs {
		if err := c.t.AddCsums(disk.LogicalAddr(rn.at), slices.Clone(rn.sums)); err != nil {
			return err
		}
	}
	return nil
}

// fixups recounts what the replay may have changed of every inode it
// touched: nlink from the names, a directory's size from its entries, a
// file's nbytes from its extents. An inode without names is removed.
func (r *replayer) fixups() error {
	// Removing an inode can take names from others (a directory's
	// entries): repeat until no inode is left touched.
	for len(r.touched) > 0 {
		inos := make([]disk.ObjectID, 0, len(r.touched))
		for ino := range r.touched {
			inos = append(inos, ino)
		}
		slices.Sort(inos)
		clear(r.touched)
		for _, ino := range inos {
			if err := r.fixup(ino); err != nil {
				return err
			}
		}
	}
	return nil
}

// fixup recounts one inode (see fixups).
func (r *replayer) fixup(ino disk.ObjectID) error {
	c := r.c
	in, err := c.findInode(ino)
	if err != nil {
		return err
	}
	if in == nil {
		return nil
	}
	names, err := r.names(ino)
	if err != nil {
		return err
	}
	if len(names) == 0 && ino != disk.FirstFreeInode {
		return r.remove(in)
	}
	if in.item.IsDir() {
		size, _, err := r.dirSize(ino)
		if err != nil {
			return err
		}
		in.item.Size, in.item.NLink = size, 1
	} else {
		in.item.NLink = uint32(len(names))
		var nb uint64
		exts, err := c.fileExtents(ino, 0, math.MaxUint64)
		if err != nil {
			return err
		}
		for i := range exts {
			nb += nbytesOf(&exts[i])
		}
		in.item.NBytes = nb
	}
	return c.putInode(in)
}

// dirSize is the size of directory ino from its DIR_INDEX entries, and
// their number.
func (r *replayer) dirSize(ino disk.ObjectID) (size uint64, n int, err error) {
	c := r.c
	err = c.tr.Range(c.tx, disk.Key{ObjectID: ino, Type: disk.DirIndexKey},
		disk.Key{ObjectID: ino, Type: disk.DirIndexKey, Offset: math.MaxUint64}, func(k disk.Key, data []byte) (bool, error) {
			es, err := disk.ParseDirItems(data)
			if err != nil {
				return false, &disk.CorruptError{Tree: c.tr.Owner(), Key: &k, What: "dir index", Err: err}
			}
			for _, e := range es {
				size += 2 * uint64(len(e.Name))
				n++
			}
			return true, nil
		})
	return size, n, err
}

// remove deletes an inode left without names, with its data, as the
// kernel's orphan cleanup after replay would. A directory loses its
// entries first (their inodes are recounted in turn, as on Linux, where
// the replay empties a directory left without a name).
func (r *replayer) remove(in *winode) error {
	c := r.c
	if in.item.IsDir() {
		type entry struct {
			name   []byte
			target disk.Key
		}
		var ents []entry
		err := c.tr.Range(c.tx, disk.Key{ObjectID: in.ino, Type: disk.DirIndexKey},
			disk.Key{ObjectID: in.ino, Type: disk.DirIndexKey, Offset: math.MaxUint64}, func(k disk.Key, data []byte) (bool, error) {
				es, err := disk.ParseDirItems(data)
				if err != nil {
					return false, &disk.CorruptError{Tree: c.tr.Owner(), Key: &k, What: "dir index", Err: err}
				}
				for _, e := range es {
					ents = append(ents, entry{slices.Clone(e.Name), e.Location})
				}
				return true, nil
			})
		if err != nil {
			return err
		}
		for _, e := range ents {
			if e.target.Type != disk.InodeItemKey {
				return fmt.Errorf("%w: log replay removes directory %d holding subvolume %q", ErrUnsupported, in.ino, e.name)
			}
			if err := r.unlinkName(in.ino, e.name, e.target.ObjectID); err != nil {
				return err
			}
		}
	}
	if err := c.dropFileData(in); err != nil {
		return err
	}
	_, err := c.tr.DeleteRange(c.tx, disk.Key{ObjectID: in.ino}, disk.Key{ObjectID: in.ino, Type: 0xff, Offset: math.MaxUint64})
	return err
}
