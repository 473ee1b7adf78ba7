package check

import (
	"errors"

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
	diskLen   uint64
	refs      []dataRef
	hasExtent bool
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

// checkLog reads every block of the log tree: btrfs check verifies it
// can be replayed; we verify it can be read.
func (c *checker) checkLog() {
	root := ctree.Root{Addr: c.sb.LogRoot, Level: int(c.sb.LogRootLevel), Owner: disk.TreeLogObjectID}
	err := ctree.Walk(c, root, func(n disk.Node, _ int) error {
		if !n.IsLeaf() || n.Owner() != disk.TreeLogObjectID {
			return nil
		}
		return nil
	})
	if err != nil {
		c.problemf(KindTreeBlock, disk.TreeLogObjectID, c.sb.LogRoot, nil, "log tree: %v", err)
	}
}

// checkRootItems reads the root tree and every ROOT_ITEM in it, and the
// root block each one locates. A root tree that cannot be read stops the
// check: nothing else can be found without it.
func (c *checker) checkRootItems() error {
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

// walkTrees reads every block of every tree once, checks it, and records
// every pointer to it (blocks) and every file extent's pointer to a data
// extent (data). A block shared by several trees is descended into once.
func (c *checker) walkTrees() error {
	for _, t := range c.trees {
		if err := c.ctx.Err(); err != nil {
			return err
		}
		rec := c.blockRec(t.root.Addr)
		rec.roots = append(rec.roots, t.id)
		stack := []walkItem{{addr: t.root.Addr, expect: rootExpect(t.root), tree: t.id}}
		for len(stack) > 0 {
			w := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
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
			n, err := c.ReadBlock(w.addr, w.expect)
			if err != nil {
				c.blockProblem(w, err)
				continue
			}
			rec.owner = n.Owner()
			rec.level = uint8(n.Level())
			c.countBlock(n, w.tree)
			if n.IsLeaf() {
				c.checkLeaf(n, w.tree)
				continue
			}
			for i := n.NumItems() - 1; i >= 0; i-- {
				kp := n.KeyPtr(i)
				child := c.blockRec(kp.BlockPtr)
				child.parents = append(child.parents, n.Bytenr())
				k := kp.Key
				stack = append(stack, walkItem{addr: kp.BlockPtr, tree: w.tree, expect: disk.Expect{
					Bytenr: kp.BlockPtr, Level: n.Level() - 1, Generation: kp.Generation,
					Owner: w.tree, OwnerAny: sharedOwner(w.tree), FirstKey: &k}})
			}
		}
	}
	return nil
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

// checkLeaf applies the tree-checker's item rules and records the data
// extents the leaf's file extents point at.
func (c *checker) checkLeaf(n disk.Node, tree disk.ObjectID) {
	p := c.items
	p.Tree = tree
	if err := disk.CheckLeafItems(n, p); err != nil {
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
	if !holdsFiles(tree) {
		return
	}
	s := &c.report.Summary
	for i := 0; i < n.NumItems(); i++ {
		k := n.Key(i)
		if k.Type != disk.ExtentDataKey {
			continue
		}
		var fe disk.FileExtentItem
		if fe.Decode(n.ItemData(i)) != nil || fe.Type == disk.FileExtentInline || fe.DiskBytenr == 0 {
			continue
		}
		s.DataBytesAllocated += fe.DiskNumBytes
		s.DataBytesReferenced += fe.NumBytes
		d := c.data[fe.DiskBytenr]
		if d == nil {
			d = &dataRec{diskLen: fe.DiskNumBytes}
			c.data[fe.DiskBytenr] = d
		} else if d.diskLen != fe.DiskNumBytes {
			kk := k
			c.problemf(KindExtentRef, tree, fe.DiskBytenr, &kk, "file extent [%d %d] of root %d inode %d offset %d disagrees with other references' length %d",
				fe.DiskBytenr, fe.DiskNumBytes, tree, k.ObjectID, k.Offset, d.diskLen)
		}
		d.refs = append(d.refs, dataRef{root: n.Owner(), ino: k.ObjectID, off: k.Offset - fe.Offset, leaf: n.Bytenr()})
	}
}
