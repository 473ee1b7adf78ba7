package check

import (
	"bytes"
	"sort"

	"github.com/gobtrfs/btrfs/internal/ctree"
	"github.com/gobtrfs/btrfs/internal/disk"
)

// rootLink is one subvolume's place in its parent: a ROOT_REF in the
// parent's id, a ROOT_BACKREF in the child's.
type rootLink struct {
	parent, child disk.ObjectID
}

type rootLinkRec struct {
	ref, backref      bool
	refItem, backItem disk.RootRef
}

// checkRootRefs matches ROOT_REF with ROOT_BACKREF items and each with
// the directory entry in the parent subvolume that names the child.
func (c *checker) checkRootRefs() error {
	links := map[rootLink]*rootLinkRec{}
	orphans := map[disk.ObjectID]bool{}
	get := func(l rootLink) *rootLinkRec {
		r := links[l]
		if r == nil {
			r = &rootLinkRec{}
			links[l] = r
		}
		return r
	}
	t0 := c.trees[0]
	err := c.forEachItem(t0, func(k disk.Key, data []byte, leaf disk.Node) error {
		if k.ObjectID == disk.OrphanObjectID && k.Type == disk.OrphanItemKey {
			orphans[disk.ObjectID(k.Offset)] = true
			return nil
		}
		if k.Type != disk.RootRefKey && k.Type != disk.RootBackrefKey {
			return nil
		}
		var rr disk.RootRef
		if err := rr.Decode(data); err != nil {
			kk := k
			c.problemf(KindItem, disk.RootTreeObjectID, leaf.Bytenr(), &kk, "root ref %v: %v", k, err)
			return nil
		}
		if k.Type == disk.RootRefKey {
			r := get(rootLink{k.ObjectID, disk.ObjectID(k.Offset)})
			r.ref, r.refItem = true, rr
		} else {
			r := get(rootLink{disk.ObjectID(k.Offset), k.ObjectID})
			r.backref, r.backItem = true, rr
		}
		return nil
	})
	if err != nil {
		return err
	}
	keys := make([]rootLink, 0, len(links))
	for l := range links {
		keys = append(keys, l)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].child != keys[j].child {
			return keys[i].child < keys[j].child
		}
		return keys[i].parent < keys[j].parent
	})
	linked := map[disk.ObjectID]bool{}
	for _, l := range keys {
		r := links[l]
		linked[l.child] = true
		bad := func(what string) {
			c.problemf(KindRootRef, disk.RootTreeObjectID, 0, nil, "ERROR: root %d ref %d: %s", l.child, l.parent, what)
		}
		switch {
		case !r.ref:
			bad("no root ref, only a root backref")
			continue
		case !r.backref:
			bad("no root backref, only a root ref")
			continue
		case r.refItem.DirID != r.backItem.DirID || r.refItem.Sequence != r.backItem.Sequence || !bytes.Equal(r.refItem.Name, r.backItem.Name):
			bad("root ref and root backref differ")
		}
		if !c.hasTree(l.child) {
			bad("child subvolume has no root item")
		}
		if !c.dirEntryNames(l.parent, r.refItem, l.child) {
			bad("no dir item in the parent subvolume")
		}
	}
	// Every live subvolume except the top one is linked somewhere.
	for _, id := range c.sortedTreeIDs() {
		if id < disk.FirstFreeObjectID || id > disk.LastFreeObjectID || linked[id] {
			continue
		}
		t, _ := c.tree(id)
		if t.item.Refs == 0 {
			// Deleted, waiting for the cleaner, which finds it by
			// its orphan item.
			if !orphans[id] {
				c.problemf(KindRootRef, disk.RootTreeObjectID, 0, nil, "fs tree %d missing orphan item", id)
			}
			continue
		}
		c.problemf(KindRootRef, disk.RootTreeObjectID, 0, nil, "ERROR: root %d has no root backref but its root item has refs %d", id, t.item.Refs)
	}
	return c.checkUUIDTree()
}

// dirEntryNames reports whether subvolume parent has a DIR_ITEM in
// directory ref.DirID naming the child subvolume.
func (c *checker) dirEntryNames(parent disk.ObjectID, ref disk.RootRef, child disk.ObjectID) bool {
	t, ok := c.tree(parent)
	if !ok {
		return false
	}
	k := disk.Key{ObjectID: ref.DirID, Type: disk.DirItemKey, Offset: disk.NameHash(ref.Name)}
	cur := ctree.NewCursor(c, t.root)
	ok, err := cur.Seek(k)
	if err != nil || !ok || cur.Key() != k {
		return false
	}
	items, err := disk.ParseDirItems(cur.Data())
	if err != nil {
		return false
	}
	for _, d := range items {
		if bytes.Equal(d.Name, ref.Name) && d.Location.ObjectID == child && d.Location.Type == disk.RootItemKey {
			return true
		}
	}
	return false
}
