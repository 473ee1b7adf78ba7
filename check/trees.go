package check

import (
	"errors"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/gobtrfs/btrfs/internal/ctree"
	"github.com/gobtrfs/btrfs/internal/disk"
)

// blockRec is what the walk learned about one tree block: who points at
// it. Its extent item must hold exactly these references.
type blockRec struct {
	parents []disk.LogicalAddr // node blocks holding a pointer to it
	roots   []disk.ObjectID    // trees whose ROOT_ITEM (or superblock) points at it
	owner   disk.ObjectID      // header owner
	level   uint8
	visited bool // read and descended into
	// hasExtent is set when the extent tree's item for the block is met.
	hasExtent bool
}

func (r *blockRec) refs() uint64 { return uint64(len(r.parents) + len(r.roots)) }

// dataRec gathers the file extent items pointing at one data extent.
type dataRec struct {
	diskLen uint64
	refs    []dataRef
}

// dataRef is one EXTENT_DATA item pointing at a data extent: the data
// backref it needs is (root, ino, off) or, when leaf is shared with a
// full backref, (leaf).
type dataRef struct {
	root disk.ObjectID
	ino  disk.ObjectID
	off  uint64
	leaf disk.LogicalAddr
}

// sharedOwner reports whether blocks of tree id may be owned by another
// tree (subvolume trees share blocks after snapshots).
func sharedOwner(id disk.ObjectID) bool {
	return id == disk.FSTreeObjectID || (id >= disk.FirstFreeObjectID && id <= disk.LastFreeObjectID) ||
		id == disk.DataRelocTreeObjectID || id == disk.TreeRelocObjectID
}

// holdsFiles reports whether tree id holds inodes and file extents.
func holdsFiles(id disk.ObjectID) bool {
	return id == disk.FSTreeObjectID || (id >= disk.FirstFreeObjectID && id <= disk.LastFreeObjectID) ||
		id == disk.DataRelocTreeObjectID || id == disk.TreeRelocObjectID
}

func rootExpect(r ctree.Root) disk.Expect {
	return disk.Expect{Bytenr: r.Addr, Level: r.Level, Generation: r.Generation, Owner: r.Owner, OwnerAny: sharedOwner(r.Owner)}
}

// checkLog reads the log root tree and every log tree it locates, and
// checks that each logged data extent has its checksums logged too (a
// replay would otherwise leave data without checksums). The data extents
// the log references are noted: the csum tree may already hold their
// sums before the log is replayed.
func (c *checker) checkLog() {
	logRoot := treeRoot{id: disk.TreeLogObjectID, root: ctree.Root{Addr: c.sb.LogRoot, Level: int(c.sb.LogRootLevel), Owner: disk.TreeLogObjectID}}
	if _, err := c.ReadBlock(logRoot.root.Addr, rootExpect(logRoot.root)); err != nil {
		c.problemf(KindTreeBlock, disk.TreeLogObjectID, c.sb.LogRoot, nil, "log root tree: %v", err)
		return
	}
	var logs []treeRoot
	c.forEachItem(logRoot, func(k disk.Key, data []byte, leaf disk.Node) error {
		var ri disk.RootItem
		if k.Type == disk.RootItemKey && ri.Decode(data) == nil {
			logs = append(logs, treeRoot{id: disk.ObjectID(k.Offset), key: k, item: ri,
				root: ctree.Root{Addr: ri.Bytenr, Level: int(ri.Level), Generation: ri.Generation, Owner: disk.TreeLogObjectID}})
		}
		return nil
	})
	type need struct {
		ino        disk.ObjectID
		off        uint64
		start, end disk.LogicalAddr
	}
	for _, t := range logs {
		if _, err := c.ReadBlock(t.root.Addr, rootExpect(t.root)); err != nil {
			c.problemf(KindTreeBlock, disk.TreeLogObjectID, t.root.Addr, nil, "log tree of root %d: %v", t.id, err)
			continue
		}
		var needs []need
		var sums []span
		flags := map[disk.ObjectID]disk.InodeFlags{}
		c.forEachItem(t, func(k disk.Key, data []byte, leaf disk.Node) error {
			switch k.Type {
			case disk.InodeItemKey:
				var it disk.InodeItem
				if it.Decode(data) == nil {
					flags[k.ObjectID] = it.Flags
				}
			case disk.ExtentDataKey:
				var fe disk.FileExtentItem
				if fe.Decode(data) != nil || fe.Type != disk.FileExtentReg || fe.DiskBytenr == 0 {
					return nil
				}
				c.logData = append(c.logData, span{fe.DiskBytenr, fe.DiskNumBytes})
				if flags[k.ObjectID]&disk.InodeNoDataSum != 0 && fe.Compression == disk.CompressNone {
					return nil
				}
				s, e := fe.DiskBytenr+disk.LogicalAddr(fe.Offset), fe.DiskBytenr+disk.LogicalAddr(fe.Offset+fe.NumBytes)
				if fe.Compression != disk.CompressNone {
					s, e = fe.DiskBytenr, fe.DiskBytenr+disk.LogicalAddr(fe.DiskNumBytes)
				}
				needs = append(needs, need{k.ObjectID, k.Offset, s, e})
			case disk.ExtentCsumKey:
				if e, ok := disk.CsumItemEnd(k.Offset, len(data), c.sb.CsumType.Size(), c.sb.SectorSize); ok {
					sums = append(sums, span{disk.LogicalAddr(k.Offset), e - k.Offset})
				}
			}
			return nil
		})
		sort.Slice(sums, func(i, j int) bool { return sums[i].start < sums[j].start })
		committed := c.newCsumLookup()
		for _, n := range needs {
			// The sums may also be in the csum tree already.
			if !spansCover(sums, n.start, n.end) && !committed.covers(n.start, n.end) {
				c.problemf(KindCsum, disk.TreeLogObjectID, n.start, nil, "ERROR: csum missing in log (root %d inode %d offset %d address %#x length %d)",
					t.id, n.ino, n.off, uint64(n.start), uint64(n.end-n.start))
			}
		}
	}
	sort.Slice(c.logData, func(i, j int) bool { return c.logData[i].start < c.logData[j].start })
}

// spansCover reports whether sorted spans cover [start, end).
func spansCover(spans []span, start, end disk.LogicalAddr) bool {
	pos := start
	for _, s := range spans {
		if s.start > pos {
			break
		}
		pos = max(pos, s.end())
		if pos >= end {
			return true
		}
	}
	return pos >= end
}

// loadRoots reads the root tree and every ROOT_ITEM in it. A root tree
// that cannot be read stops the check: nothing else can be found without
// it.
func (c *checker) loadRoots() error {
	rootTree := ctree.Root{Addr: c.sb.Root, Level: int(c.sb.RootLevel), Generation: c.sb.Generation, Owner: disk.RootTreeObjectID}
	if _, err := c.ReadBlock(rootTree.Addr, rootExpect(rootTree)); err != nil {
		return &disk.CorruptError{Logical: c.sb.Root, Tree: disk.RootTreeObjectID, What: "cannot read root tree", Err: err}
	}
	chunkTree := ctree.Root{Addr: c.sb.ChunkRoot, Level: int(c.sb.ChunkRootLevel), Generation: c.sb.ChunkRootGeneration, Owner: disk.ChunkTreeObjectID}
	c.trees = []treeRoot{{id: disk.RootTreeObjectID, root: rootTree}, {id: disk.ChunkTreeObjectID, root: chunkTree}}
	t0 := c.trees[0]
	err := c.forEachItem(t0, func(k disk.Key, data []byte, leaf disk.Node) error {
		if k.Type != disk.RootItemKey {
			return nil
		}
		var ri disk.RootItem
		if err := ri.Decode(data); err != nil {
			kk := k
			c.problemf(KindRootItem, disk.RootTreeObjectID, leaf.Bytenr(), &kk, "root item %v: %v", k, err)
			return nil
		}
		id := k.ObjectID
		r := ctree.Root{Addr: ri.Bytenr, Level: int(ri.Level), Generation: ri.Generation, Owner: id}
		if id == disk.TreeRelocObjectID {
			// Relocation trees are owned by TREE_RELOC; every one of
			// them has that objectid, told apart by the key offset.
			r.Owner = disk.TreeRelocObjectID
		}
		c.trees = append(c.trees, treeRoot{id: id, key: k, root: r, item: ri})
		return nil
	})
	if err != nil {
		return err
	}
	c.treeByID = map[disk.ObjectID][]treeRoot{}
	for _, t := range c.trees {
		c.treeByID[t.id] = append(c.treeByID[t.id], t)
	}
	return nil
}

// checkRootBlocks reads the root block of every tree a ROOT_ITEM names.
func (c *checker) checkRootBlocks() error {
	for _, t := range c.trees[2:] {
		if _, err := c.ReadBlock(t.root.Addr, rootExpect(t.root)); err != nil {
			kk := t.key
			c.problemf(KindRootItem, t.id, t.root.Addr, &kk, "root %d root item points to bad tree block %d: %v", t.id, t.root.Addr, err)
		}
	}
	return nil
}

// walkItem is one pending block of the tree walk.
type walkItem struct {
	addr   disk.LogicalAddr
	expect disk.Expect
	tree   disk.ObjectID
}

// walkBatch is how many blocks are read at once, in parallel, during the
// walk. The walk goes depth first over batches, so it holds at most a
// batch's children per level: its memory does not grow with the tree.
const walkBatch = 64

// walkTrees reads every block of every tree once, checks it, and records
// every pointer to it (blocks) and every file extent's pointer to a data
// extent (data). A block shared by several trees is descended into once.
// Reading, checksumming and the item rules run on Workers goroutines; the
// bookkeeping runs on one.
func (c *checker) walkTrees() error {
	for _, t := range c.trees {
		rec := c.blockRec(t.root.Addr)
		rec.roots = append(rec.roots, t.id)
		if err := c.walkLevel(t, []walkItem{{addr: t.root.Addr, expect: rootExpect(t.root), tree: t.id}}); err != nil {
			return err
		}
	}
	return nil
}

// walked is one block read by the walk.
type walked struct {
	n       disk.Node
	err     error
	leafErr error
}

// walkLevel reads items (blocks of one level of tree t) in batches and,
// after each batch, walks the children of that batch.
func (c *checker) walkLevel(t treeRoot, items []walkItem) error {
	// A snapshot being deleted has freed everything left of its drop
	// progress key at its drop level: those blocks are gone.
	dropping := t.item.Refs == 0 && t.item.DropProgress != (disk.Key{})
	for len(items) > 0 {
		if err := c.ctx.Err(); err != nil {
			return err
		}
		batch := items[:min(walkBatch, len(items))]
		items = items[len(batch):]
		todo := batch[:0:0]
		for _, w := range batch {
			rec := c.blockRec(w.addr)
			if rec.visited {
				// Met again through another pointer: its header must
				// still agree with what that pointer promises.
				if n, ok := c.cache.get(w.addr); ok {
					if err := n.CheckExpect(c.params, w.expect); err != nil {
						c.blockProblem(w, err)
					}
				}
				continue
			}
			rec.visited = true
			todo = append(todo, w)
		}
		res := make([]walked, len(todo))
		c.parallel(len(todo), func(i int) {
			w := todo[i]
			r := &res[i]
			r.n, r.err = c.ReadBlock(w.addr, w.expect)
			if r.err == nil && r.n.IsLeaf() {
				p := c.items
				p.Tree = w.tree
				r.leafErr = disk.CheckLeafItems(r.n, p)
			}
		})
		var children []walkItem
		for i, w := range todo {
			n, err := res[i].n, res[i].err
			if err != nil {
				c.blockProblem(w, err)
				continue
			}
			rec := c.blocks[w.addr]
			rec.owner = n.Owner()
			rec.level = uint8(n.Level())
			c.countBlock(n, w.tree)
			if n.IsLeaf() {
				c.leafProblem(n, w.tree, res[i].leafErr)
				c.leafData(n, w.tree)
				continue
			}
			for i := 0; i < n.NumItems(); i++ {
				kp := n.KeyPtr(i)
				if dropping && c.dropped(n, i, t.item) {
					continue
				}
				child := c.blockRec(kp.BlockPtr)
				child.parents = append(child.parents, n.Bytenr())
				k := kp.Key
				children = append(children, walkItem{addr: kp.BlockPtr, tree: w.tree, expect: disk.Expect{
					Bytenr: kp.BlockPtr, Level: n.Level() - 1, Generation: kp.Generation,
					Owner: w.tree, OwnerAny: sharedOwner(w.tree), FirstKey: &k}})
			}
		}
		if err := c.walkLevel(t, children); err != nil {
			return err
		}
	}
	return nil
}

// parallel runs fn(0..n-1) on up to Workers goroutines.
func (c *checker) parallel(n int, fn func(i int)) {
	w := min(c.opts.Workers, n)
	if w <= 1 {
		for i := 0; i < n; i++ {
			fn(i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range w {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				fn(i)
			}
		}()
	}
	wg.Wait()
}

func (c *checker) blockRec(addr disk.LogicalAddr) *blockRec {
	r := c.blocks[addr]
	if r == nil {
		r = &blockRec{}
		c.blocks[addr] = r
	}
	return r
}

func (c *checker) blockProblem(w walkItem, err error) {
	var ce *disk.CorruptError
	msg := err.Error()
	if errors.As(err, &ce) {
		msg = ce.What
		if ce.Err != nil {
			msg += ": " + ce.Err.Error()
		}
	}
	c.problemf(KindTreeBlock, w.tree, w.addr, nil, "tree block %d in %s tree: %s", w.addr, treeName(w.tree), msg)
}

// countBlock adds n to the summary's tree totals.
func (c *checker) countBlock(n disk.Node, tree disk.ObjectID) {
	s := &c.report.Summary
	ns := uint64(c.params.NodeSize)
	s.TreeBytes += ns
	switch {
	case holdsFiles(tree) && tree != disk.TreeRelocObjectID:
		s.FSTreeBytes += ns
	case tree == disk.ExtentTreeObjectID:
		s.ExtentTreeBytes += ns
	}
	if n.IsLeaf() {
		used := uint64(disk.HeaderSize)
		for i := 0; i < n.NumItems(); i++ {
			used += uint64(disk.ItemSize) + uint64(n.ItemHeader(i).Size)
		}
		if used < ns {
			s.BtreeSpaceWaste += ns - used
		}
	} else if free := disk.MaxKeyPtrs(int(ns)) - n.NumItems(); free > 0 {
		// Unused pointer slots; the bytes too few for one more pointer
		// are not counted, as btrfs check does not.
		s.BtreeSpaceWaste += uint64(free * disk.KeyPtrSize)
	}
}

// leafProblem reports what the tree-checker's item rules found in leaf n.
func (c *checker) leafProblem(n disk.Node, tree disk.ObjectID, err error) {
	if err == nil {
		return
	}
	var ce *disk.CorruptError
	var key *disk.Key
	msg := err.Error()
	if errors.As(err, &ce) {
		key = ce.Key
		msg = ce.What
		if ce.Err != nil {
			msg += ": " + ce.Err.Error()
		}
	}
	c.problemf(KindItem, tree, n.Bytenr(), key, "tree block %d in %s tree: %s", n.Bytenr(), treeName(tree), msg)
}

// fileExtentTypeOffset is where a file extent item's type byte is:
// after generation, ram_bytes, compression, encryption and
// other_encoding.
const fileExtentTypeOffset = 8 + 8 + 1 + 1 + 2

// leafData records the data extents the file extents of leaf n point at.
func (c *checker) leafData(n disk.Node, tree disk.ObjectID) {
	// File extents live in subvolume trees and, for the v1 space cache's
	// inodes, in the root tree: every one of them references data.
	files := holdsFiles(tree)
	s := &c.report.Summary
	for i := 0; i < n.NumItems(); i++ {
		k := n.Key(i)
		if k.Type != disk.ExtentDataKey {
			continue
		}
		data := n.ItemData(i)
		if len(data) > fileExtentTypeOffset && disk.FileExtentType(data[fileExtentTypeOffset]) == disk.FileExtentInline {
			continue // no data extent; skipped before Decode copies its bytes
		}
		var fe disk.FileExtentItem
		if fe.Decode(data) != nil || fe.Type == disk.FileExtentInline || fe.DiskBytenr == 0 {
			continue
		}
		if files || tree == disk.RootTreeObjectID {
			// btrfs check counts the v1 space cache's files too.
			s.DataBytesAllocated += fe.DiskNumBytes
			s.DataBytesReferenced += fe.NumBytes
		}
		c.addDataRef(fe.DiskBytenr, fe.DiskNumBytes, tree, k, dataRef{root: n.Owner(), ino: k.ObjectID, off: k.Offset - fe.Offset, leaf: n.Bytenr()})
	}
}

// dropped reports whether child i of node n in a snapshot being deleted
// was already freed: a child at the drop level whose key is below the
// drop progress key (the drop level is the level of the node whose slot
// the key names), or any child whose whole key range is below it.
func (c *checker) dropped(n disk.Node, i int, ri disk.RootItem) bool {
	dk := ri.DropProgress
	if n.Level() == int(ri.DropLevel) && n.Key(i).Less(dk) {
		return true
	}
	return i+1 < n.NumItems() && !dk.Less(n.Key(i+1)) && n.Level() > int(ri.DropLevel)
}
