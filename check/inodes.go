package check

import (
	"fmt"

	"github.com/gobtrfs/btrfs/internal/ctree"
	"github.com/gobtrfs/btrfs/internal/disk"
)

// inodeRec is what one fs tree says about one inode, gathered while its
// items stream past in key order (all items of an inode are adjacent).
type inodeRec struct {
	ino      disk.ObjectID
	hasItem  bool
	item     disk.InodeItem
	names    uint32 // INODE_REF and INODE_EXTREF entries
	dirNames uint64 // name bytes of its DIR_ITEM and DIR_INDEX entries
	nbytes   uint64 // bytes of its file extents charged to it
	extEnd   uint64 // end of the last file extent seen
	extents  int
	gap      bool   // a hole without a file extent, before NO_HOLES
	gapAt    uint64 // where the first such hole starts, when gap
	firstKey disk.Key
}

// fsTree is the state of checking one fs tree.
type fsTree struct {
	c       *checker
	t       treeRoot
	noHoles bool
	rootDir disk.ObjectID
	cur     *inodeRec
	// modes maps every inode with an item to its file type, for the name
	// checks at the end of the tree.
	modes map[disk.ObjectID]disk.FileType
	// zeroLinks are inodes with nlink 0; each needs an orphan item.
	zeroLinks map[disk.ObjectID]bool
	orphans   map[disk.ObjectID]bool
	// names streams every name record (names.go).
	names   *sorter
	nameSeq uint64
	pending []pendingProblem
	// out is what the tree's check found, in order, once finish ran.
	out   []Problem
	csums *csumLookup
	// dirIndexNames streams the DIR_INDEX names, to find a name given
	// twice in one directory (names.go).
	dirIndexNames *sorter
}

// checkFSRoots checks every subvolume tree, Workers trees at a time;
// each tree's problems are reported in tree order once all are done, so
// the output does not depend on scheduling.
func (c *checker) checkFSRoots() error {
	var trees []*fsTree
	for _, t := range c.trees {
		if !holdsFiles(t.id) || t.id == disk.TreeRelocObjectID {
			continue
		}
		if t.item.Refs == 0 && t.item.DropProgress != (disk.Key{}) {
			continue // being deleted: the cleaner owns what is left
		}
		f := &fsTree{
			c: c, t: t, csums: c.newCsumLookup(),
			noHoles:       c.sb.IncompatFlags&disk.IncompatNoHoles != 0,
			rootDir:       disk.FirstFreeInode,
			modes:         map[disk.ObjectID]disk.FileType{},
			zeroLinks:     map[disk.ObjectID]bool{},
			orphans:       map[disk.ObjectID]bool{},
			names:         newSorter(c.opts.MemoryLimit/6/int64(max(1, c.opts.Workers)), ""),
			dirIndexNames: newSorter(c.opts.MemoryLimit/12/int64(max(1, c.opts.Workers)), ""),
		}
		if t.item.RootDirID != 0 {
			f.rootDir = t.item.RootDirID
		}
		trees = append(trees, f)
	}
	errs := make([]error, len(trees))
	c.parallel(len(trees), func(i int) {
		f := trees[i]
		defer func() {
			c.nameRuns.Add(int64(f.names.Runs() + f.dirIndexNames.Runs()))
			f.names.Close()
			f.dirIndexNames.Close()
		}()
		if err := c.ctx.Err(); err != nil {
			errs[i] = err
			return
		}
		if errs[i] = c.forEachItem(f.t, f.item); errs[i] != nil {
			return
		}
		f.endInode()
		errs[i] = f.finish()
		// What the tree needed is not needed any more.
		f.modes, f.pending = nil, nil
	})
	for i, f := range trees {
		if errs[i] != nil {
			return errs[i]
		}
		for _, p := range f.out {
			c.problem(p)
		}
	}
	return nil
}

func (f *fsTree) problemf(ino disk.ObjectID, key *disk.Key, format string, args ...any) {
	f.pending = append(f.pending, pendingProblem{ino: ino, p: Problem{Kind: KindInode, Tree: uint64(f.t.id), Key: publicKey(key),
		Message: fmt.Sprintf("root %d inode %d errors: "+format, append([]any{f.t.id, ino}, args...)...)}})
}

// report records a problem found while the tree streams; it is kept
// whatever the orphan items say.
func (f *fsTree) report(kind Kind, tree disk.ObjectID, addr disk.LogicalAddr, key *disk.Key, format string, args ...any) {
	f.pending = append(f.pending, pendingProblem{p: Problem{Kind: kind, Tree: uint64(tree), Addr: uint64(addr), Key: publicKey(key), Message: fmt.Sprintf(format, args...)}})
}

// emit records a problem found by finish.
func (f *fsTree) emit(kind Kind, tree disk.ObjectID, addr disk.LogicalAddr, key *disk.Key, format string, args ...any) {
	f.out = append(f.out, Problem{Kind: kind, Tree: uint64(tree), Addr: uint64(addr), Key: publicKey(key), Message: fmt.Sprintf(format, args...)})
}

// pendingProblem is a problem of one inode, held back until the orphan
// items are known.
type pendingProblem struct {
	ino disk.ObjectID
	p   Problem
}

// item handles one item of the tree.
func (f *fsTree) item(k disk.Key, data []byte, leaf disk.Node) error {
	if k.ObjectID == disk.OrphanObjectID && k.Type == disk.OrphanItemKey {
		f.endInode()
		f.orphans[disk.ObjectID(k.Offset)] = true
		return nil
	}
	if k.ObjectID < disk.FirstFreeInode && k.ObjectID != disk.ObjectID(256) {
		// Free-inode cache items and the like (objectid < 256) carry
		// no inode state.
		if k.ObjectID != f.rootDir {
			return nil
		}
	}
	if f.cur == nil || f.cur.ino != k.ObjectID {
		f.endInode()
		f.cur = &inodeRec{ino: k.ObjectID, firstKey: k}
	}
	r := f.cur
	kk := k
	switch k.Type {
	case disk.InodeItemKey:
		if err := r.item.Decode(data); err != nil {
			f.problemf(r.ino, &kk, "bad inode item: %v", err)
			return nil
		}
		r.hasItem = true
	case disk.InodeRefKey:
		refs, err := disk.ParseInodeRefs(data)
		if err != nil {
			f.problemf(r.ino, &kk, "bad inode ref: %v", err)
			return nil
		}
		for _, ref := range refs {
			r.names++
			f.addName(disk.ObjectID(k.Offset), r.ino, ref.Name, nameRef, ref.Index, 0)
		}
	case disk.InodeExtrefKey:
		refs, err := disk.ParseInodeExtrefs(data)
		if err != nil {
			f.problemf(r.ino, &kk, "bad inode extref: %v", err)
			return nil
		}
		for _, ref := range refs {
			r.names++
			f.addName(ref.Parent, r.ino, ref.Name, nameRef, ref.Index, 0)
		}
	case disk.DirItemKey, disk.DirIndexKey:
		f.dirEntries(r, k, data)
	case disk.ExtentDataKey:
		f.fileExtent(r, k, data)
	case disk.XattrItemKey, disk.VerityDescItemKey, disk.VerityMerkleItemKey, disk.DirLogItemKey, disk.DirLogIndexKey:
	default:
		f.report(KindItem, f.t.id, leaf.Bytenr(), &kk, "ERROR: unknown key (%d %d %d) found in leaf %d", k.ObjectID, k.Type, k.Offset, leaf.Bytenr())
	}
	return nil
}

// fileExtent checks one file extent against the previous one of the
// inode and charges it to the inode's nbytes.
func (f *fsTree) fileExtent(r *inodeRec, k disk.Key, data []byte) {
	kk := k
	var fe disk.FileExtentItem
	if err := fe.Decode(data); err != nil {
		f.problemf(r.ino, &kk, "bad file extent: %v", err)
		return
	}
	ss := uint64(f.c.sb.SectorSize)
	if r.extents > 0 && k.Offset < r.extEnd {
		f.problemf(r.ino, &kk, "file extent overlap: extent at %d starts before the previous one ends at %d", k.Offset, r.extEnd)
	}
	if k.Offset > r.extEnd && !f.noHoles && !r.gap {
		r.gap, r.gapAt = true, r.extEnd
	}
	if fe.Type == disk.FileExtentInline {
		if k.Offset != 0 {
			f.problemf(r.ino, &kk, "inline file extent at offset %d", k.Offset)
		}
		r.nbytes += fe.RAMBytes
	} else if fe.DiskBytenr != 0 {
		r.nbytes += fe.NumBytes
		if fe.Type == disk.FileExtentReg && r.hasItem && (r.item.Flags&disk.InodeNoDataSum == 0 || fe.Compression != disk.CompressNone) {
			start, end := fe.DiskBytenr+disk.LogicalAddr(fe.Offset), fe.DiskBytenr+disk.LogicalAddr(fe.Offset+fe.NumBytes)
			if fe.Compression != disk.CompressNone {
				start, end = fe.DiskBytenr, fe.DiskBytenr+disk.LogicalAddr(fe.DiskNumBytes)
			}
			if !f.csums.covers(start, end) {
				f.problemf(r.ino, &kk, "some csum missing: file extent at %d, data [%d %d) has no csum", k.Offset, start, end)
			}
		}
	}
	end, ok := fe.End(k.Offset, f.c.sb.SectorSize)
	if !ok {
		end = k.Offset
	}
	if fe.Type != disk.FileExtentInline && ss != 0 && (k.Offset%ss != 0 || fe.NumBytes%ss != 0) {
		f.problemf(r.ino, &kk, "file extent at %d length %d not aligned to the sector size", k.Offset, fe.NumBytes)
	}
	r.extEnd = max(r.extEnd, end)
	r.extents++
}

// endInode checks the inode whose items just ended.
func (f *fsTree) endInode() {
	r := f.cur
	if r == nil {
		return
	}
	f.cur = nil
	if !r.hasItem {
		k := r.firstKey
		f.problemf(r.ino, &k, "no inode item")
		return
	}
	it := &r.item
	ft := it.FileType()
	f.modes[r.ino] = ft
	if it.NLink == 0 {
		f.zeroLinks[r.ino] = true
	}
	if it.IsSymlink() && it.Flags&(disk.InodeImmutable|disk.InodeAppend) != 0 {
		f.problemf(r.ino, nil, "odd inode flags %v", it.Flags)
	}
	switch {
	case it.IsDir():
		if r.ino != f.rootDir || r.names > 0 {
			if r.names != it.NLink && it.NLink != 0 {
				f.problemf(r.ino, nil, "link count wrong: nlink %d, %d names", it.NLink, r.names)
			}
		}
		if r.dirNames != it.Size {
			f.problemf(r.ino, nil, "isize wrong: dir isize %d, names need %d", it.Size, r.dirNames)
		}
	default:
		if r.names != it.NLink {
			f.problemf(r.ino, nil, "link count wrong: nlink %d, %d names", it.NLink, r.names)
		}
		if it.NBytes != r.nbytes && (it.IsRegular() || it.IsSymlink()) {
			f.problemf(r.ino, nil, "nbytes wrong: nbytes %d, file extents hold %d", it.NBytes, r.nbytes)
		}
		if it.IsRegular() && !f.noHoles {
			// Without NO_HOLES every byte below i_size needs a file
			// extent (a hole extent if nothing else). Past i_size a gap
			// is fine: fallocate KEEP_SIZE beyond EOF leaves one, and
			// the kernel fills it only when the file grows over it.
			hole := r.extEnd
			if r.gap {
				hole = r.gapAt
			}
			if hole < it.Size {
				f.problemf(r.ino, nil, "file extent discount: isize %d, first hole without a file extent at %d", it.Size, hole)
			}
		}
	}
}

// csumLookup answers whether the csum tree covers a data range.
type csumLookup struct {
	c   *checker
	cur *ctree.Cursor
}

func (c *checker) newCsumLookup() *csumLookup {
	t, ok := c.tree(disk.CsumTreeObjectID)
	if !ok {
		return &csumLookup{c: c}
	}
	return &csumLookup{c: c, cur: ctree.NewCursor(c, t.root)}
}

// covers reports whether every sector of [start, end) has a checksum.
// Without a readable csum tree it says yes: the csum phase reports that.
func (l *csumLookup) covers(start, end disk.LogicalAddr) bool {
	if l.cur == nil {
		return true
	}
	ss := l.c.sb.SectorSize
	csize := l.c.sb.CsumType.Size()
	pos := start
	ok, err := l.cur.SeekLE(disk.Key{ObjectID: disk.ExtentCsumObjectID, Type: disk.ExtentCsumKey, Offset: uint64(start)})
	if err != nil {
		return true
	}
	if !ok {
		ok, err = l.cur.First()
	}
	for ; ok && err == nil && pos < end; ok, err = l.cur.Next() {
		k := l.cur.Key()
		if k.ObjectID != disk.ExtentCsumObjectID || k.Type != disk.ExtentCsumKey {
			if k.ObjectID > disk.ExtentCsumObjectID {
				break
			}
			continue
		}
		if disk.LogicalAddr(k.Offset) > pos {
			break
		}
		e, valid := disk.CsumItemEnd(k.Offset, len(l.cur.Data()), csize, ss)
		if valid && disk.LogicalAddr(e) > pos {
			pos = disk.LogicalAddr(e)
		}
	}
	if err != nil {
		return true
	}
	return pos >= end
}
