package check

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"

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
	modes inoModes
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
	// The segment's objectids [lo, hi) (hi 0: to the end of the tree).
	lo, hi disk.ObjectID
	// stopped: an unreadable block ended the segment early; err: the
	// check could not go on.
	stopped bool
	err     error
	// nameSorters and dirSorters are the sorters of all the segments
	// finish reads (names and dirIndexNames of each).
	nameSorters, dirSorters []*sorter
	// Reused by the item parsers.
	dirBuf []disk.DirItem
	refBuf []disk.InodeRef
}

// checkFSRoots checks every subvolume tree. A tree whose root node has
// enough children is cut into Workers segments at inode boundaries (the
// items of an inode are adjacent), streamed in parallel, each into its
// own state, which finish then reads as one (a million-file tree would
// otherwise run on one core); the other trees run Workers at a time.
// Each tree's problems are reported in tree order once all are done, so
// the output does not depend on scheduling.
func (c *checker) checkFSRoots() error {
	return c.startFSRoots()()
}

// startFSRoots starts checking the subvolume trees in the background and
// returns the function that waits for the check and reports what it
// found. Nothing it checks depends on the phases between (the extent
// walk, the free space), so it runs beside them: the two cores are used
// where one of them idles, and a block the walk just read is often
// still in the cache when the fs-tree pass wants it.
func (c *checker) startFSRoots() func() error {
	done := make(chan error, 1)
	var report func() error
	go func() {
		var err error
		report, err = c.streamFSRoots()
		done <- err
	}()
	return func() error {
		if err := <-done; err != nil {
			return err
		}
		return report()
	}
}

// streamFSRoots checks the subvolume trees and returns the function that
// reports their problems, in tree order.
func (c *checker) streamFSRoots() (func() error, error) {
	var small, big [][]*fsTree
	for _, t := range c.trees {
		if !holdsFiles(t.id) || t.id == disk.TreeRelocObjectID {
			continue
		}
		if t.item.Refs == 0 && t.item.DropProgress != (disk.Key{}) {
			continue // being deleted: the cleaner owns what is left
		}
		bounds := c.segmentBounds(t, c.opts.Workers)
		segs := make([]*fsTree, len(bounds))
		for i, lo := range bounds {
			f := c.newFSTree(t)
			f.lo, f.nameSeq = lo, uint64(i)<<48
			if i+1 < len(bounds) {
				f.hi = bounds[i+1]
			}
			segs[i] = f
		}
		if len(segs) > 1 {
			big = append(big, segs)
		} else {
			small = append(small, segs)
		}
	}
	// The trees in the order they are reported.
	all := append(append([][]*fsTree(nil), big...), small...)
	slices.SortFunc(all, func(a, b []*fsTree) int { return cmp.Compare(a[0].t.id, b[0].t.id) })
	errs := map[*fsTree]error{}
	var emu sync.Mutex
	setErr := func(f *fsTree, err error) {
		emu.Lock()
		errs[f] = err
		emu.Unlock()
	}
	for _, segs := range big {
		c.parallel(len(segs), func(i int) { segs[i].stream() })
		setErr(segs[0], c.finishTree(segs))
	}
	c.parallel(len(small), func(i int) {
		segs := small[i]
		segs[0].stream()
		setErr(segs[0], c.finishTree(segs))
	})
	return func() error {
		for _, segs := range all {
			if err := errs[segs[0]]; err != nil {
				return err
			}
			for _, p := range segs[0].out {
				c.problem(p)
			}
		}
		return nil
	}, nil
}

func (c *checker) newFSTree(t treeRoot) *fsTree {
	div := int64(max(1, c.opts.Workers))
	f := &fsTree{
		c: c, t: t, csums: c.newCsumLookup(),
		noHoles:       c.sb.IncompatFlags&disk.IncompatNoHoles != 0,
		rootDir:       disk.FirstFreeInode,
		zeroLinks:     map[disk.ObjectID]bool{},
		orphans:       map[disk.ObjectID]bool{},
		names:         newSorter(c.opts.MemoryLimit/6/div, ""),
		dirIndexNames: newSorter(c.opts.MemoryLimit/12/div, ""),
	}
	if t.item.RootDirID != 0 {
		f.rootDir = t.item.RootDirID
	}
	return f
}

// segmentBounds returns the first objectids of up to n segments of tree
// t, cut where the children of its root node start (rounded to whole
// inodes); one segment from 0 when the root is a leaf, has too few
// children or cannot be read.
func (c *checker) segmentBounds(t treeRoot, n int) []disk.ObjectID {
	bounds := []disk.ObjectID{0}
	if n <= 1 || t.root.Level == 0 {
		return bounds
	}
	root, err := c.ReadBlock(t.root.Addr, rootExpect(t.root))
	if err != nil || root.IsLeaf() || root.NumItems() < 2*n {
		return bounds
	}
	for i := 1; i < n; i++ {
		o := root.Key(i * root.NumItems() / n).ObjectID
		if o > bounds[len(bounds)-1] {
			bounds = append(bounds, o)
		}
	}
	return bounds
}

// stream feeds the items of the segment's objectids [lo, hi) (hi 0: to
// the end) to item. An unreadable block ends the segment (stopped): the
// tree walk reports it, and what lies after it is not looked at.
func (f *fsTree) stream() {
	if f.err = f.c.ctx.Err(); f.err != nil {
		return
	}
	cur := ctree.NewCursor(f.c, f.t.root)
	ok, err := cur.Seek(disk.Key{ObjectID: f.lo})
	for ; ok && err == nil; ok, err = cur.Next() {
		k := cur.Key()
		if f.hi != 0 && k.ObjectID >= f.hi {
			break
		}
		f.item(k, cur.Data(), cur.Leaf())
	}
	if err != nil {
		if !errors.Is(err, disk.ErrCorrupt) && !errors.Is(err, errRead) {
			f.err = err
		}
		f.stopped = true
	}
	f.endInode()
}

// finishTree joins the segments of one tree, up to the first that
// stopped early (a walk in one piece would have stopped there), and runs
// the checks that need the whole tree; segs[0] holds the result.
func (c *checker) finishTree(segs []*fsTree) error {
	f := segs[0]
	defer func() {
		for _, g := range segs {
			c.nameRuns.Add(int64(g.names.Runs() + g.dirIndexNames.Runs()))
			g.names.Close()
			g.dirIndexNames.Close()
		}
		// What the tree needed is not needed any more.
		f.modes, f.pending = inoModes{}, nil
	}()
	use := len(segs)
	for i, g := range segs {
		if g.err != nil {
			return g.err
		}
		if g.stopped {
			use = i + 1
			break
		}
	}
	f.nameSorters = []*sorter{f.names}
	f.dirSorters = []*sorter{f.dirIndexNames}
	for _, g := range segs[1:use] {
		f.modes.add(g.modes)
		maps.Copy(f.zeroLinks, g.zeroLinks)
		maps.Copy(f.orphans, g.orphans)
		f.pending = append(f.pending, g.pending...)
		f.nameSorters = append(f.nameSorters, g.names)
		f.dirSorters = append(f.dirSorters, g.dirIndexNames)
		g.modes, g.zeroLinks, g.orphans, g.pending = inoModes{}, nil, nil, nil
	}
	return f.finish()
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
		refs, err := viewInodeRefs(data, f.refBuf)
		f.refBuf = refs
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
	f.modes.set(r.ino, ft)
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

// inoModes maps inodes to their file types. The items of a tree stream
// in key order, so inodes are met in ascending order and sorted slices,
// searched by halving, do what a map did at a sixth of the memory and
// without the map's growth (a third of the fs-tree pass's bookkeeping
// on a million inodes). The slices are fixed-size chunks, so growing
// copies nothing and joining segments appends chunks.
type inoModes struct {
	chunks   [][]inoMode
	unsorted bool // an inode was met out of order (a damaged tree)
}

type inoMode struct {
	ino disk.ObjectID
	ft  disk.FileType
}

const inoModeChunk = 1 << 15

func (m *inoModes) last() (disk.ObjectID, bool) {
	if len(m.chunks) == 0 {
		return 0, false
	}
	c := m.chunks[len(m.chunks)-1]
	return c[len(c)-1].ino, true
}

func (m *inoModes) set(ino disk.ObjectID, ft disk.FileType) {
	if l, ok := m.last(); ok && l >= ino {
		m.unsorted = true
	}
	n := len(m.chunks)
	if n == 0 || len(m.chunks[n-1]) == cap(m.chunks[n-1]) {
		m.chunks = append(m.chunks, make([]inoMode, 0, inoModeChunk))
		n++
	}
	m.chunks[n-1] = append(m.chunks[n-1], inoMode{ino, ft})
}

// add appends the inodes of o, a later segment of the same tree.
func (m *inoModes) add(o inoModes) {
	if len(o.chunks) == 0 {
		return
	}
	if l, ok := m.last(); ok && l >= o.chunks[0][0].ino {
		m.unsorted = true
	}
	m.chunks = append(m.chunks, o.chunks...)
	m.unsorted = m.unsorted || o.unsorted
}

// sort readies get after inodes were met out of order; the last type
// set for an inode is kept, as a map would keep it.
func (m *inoModes) sort() {
	if !m.unsorted {
		return
	}
	var all []inoMode
	for _, c := range m.chunks {
		all = append(all, c...)
	}
	slices.SortStableFunc(all, func(a, b inoMode) int { return cmp.Compare(a.ino, b.ino) })
	out := all[:0]
	for i, r := range all {
		if i+1 < len(all) && all[i+1].ino == r.ino {
			continue
		}
		out = append(out, r)
	}
	m.chunks, m.unsorted = [][]inoMode{out}, false
	if len(out) == 0 {
		m.chunks = nil
	}
}

func (m *inoModes) get(ino disk.ObjectID) (disk.FileType, bool) {
	// The last chunk whose first inode is <= ino.
	i := sort.Search(len(m.chunks), func(i int) bool { return m.chunks[i][0].ino > ino }) - 1
	if i < 0 {
		return 0, false
	}
	c := m.chunks[i]
	j, ok := slices.BinarySearchFunc(c, ino, func(r inoMode, ino disk.ObjectID) int { return cmp.Compare(r.ino, ino) })
	if !ok {
		return 0, false
	}
	return c[j].ft, true
}
