package dump

import (
	"errors"
	"fmt"
	"io"

	"github.com/gobtrfs/btrfs/internal/ctree"
	"github.com/gobtrfs/btrfs/internal/disk"
)

// All prints the whole filesystem as `btrfs inspect-internal dump-tree`
// without -t or -b does: the root tree, the chunk tree and the log root
// tree (if any), then every tree with a ROOT_ITEM in the root tree (and
// then in the log root tree) in key order, labelled "<name> tree key
// (...)", then the totals from the superblock. o.Extents, o.Device,
// o.Roots, o.Backups and o.UUID narrow it as the matching options do.
func All(w io.Writer, src Source, o TreeOptions) error {
	d := newDumper(w, src, o)
	err := d.all(0)
	return errors.Join(err, d.p.flush())
}

// Tree prints one tree as `dump-tree -t ID` does: the root, chunk and log
// root trees by themselves, any other tree under its "<name> tree key
// (...)" label followed by the totals. A tree that does not exist prints
// only the totals, like progs.
func Tree(w io.Writer, src Source, id disk.ObjectID, o TreeOptions) error {
	d := newDumper(w, src, o)
	err := d.all(id)
	return errors.Join(err, d.p.flush())
}

// rootTree locates the root tree, as the superblock says.
func (d *dumper) rootTree() ctree.Root {
	return ctree.Root{Addr: d.sb.Root, Level: int(d.sb.RootLevel), Generation: d.sb.Generation, Owner: disk.RootTreeObjectID}
}

// all is the body of dump-tree after the options are parsed; id 0 means
// no -t. Only a root or chunk tree that cannot be read is an error (progs
// cannot open such a filesystem); other unreadable blocks are reported on
// the error stream and skipped.
func (d *dumper) all(id disk.ObjectID) error {
	o := d.o
	root, rootErr := d.read(uint64(d.sb.Root))
	chunkRoot, chunkErr := d.read(uint64(d.sb.ChunkRoot))
	var logRoot disk.Node
	if d.sb.LogRoot != 0 {
		if n, err := d.read(uint64(d.sb.LogRoot)); err == nil {
			logRoot = n
		} else {
			d.errorf("cannot read log root tree at %d: %v", d.sb.LogRoot, err)
		}
	}
	if rootErr != nil {
		return fmt.Errorf("cannot read the root tree: %w", rootErr)
	}
	if chunkErr != nil {
		return fmt.Errorf("cannot read the chunk tree: %w", chunkErr)
	}
	if !o.Extents && !o.UUID && id == 0 {
		d.superTrees(root, chunkRoot, logRoot)
	}
	switch id {
	case disk.RootTreeObjectID:
		d.label("root tree\n", "root", id, nil, root)
		d.tree(root, true)
		return nil
	case disk.ChunkTreeObjectID:
		d.label("chunk tree\n", "chunk", id, nil, chunkRoot)
		d.tree(chunkRoot, true)
		return nil
	case disk.BlockGroupTreeObjectID:
		// progs prints the block-group tree from its own root pointer,
		// like the chunk tree: no key, no totals, and only an error
		// where the filesystem has none.
		bg := d.blockGroupRoot()
		if bg == nil {
			d.errorf("cannot print block group tree, invalid pointer")
			return nil
		}
		d.label("block group tree\n", "block group", id, nil, bg)
		d.tree(bg, true)
		return nil
	case disk.TreeLogObjectID:
		if logRoot == nil {
			d.errorf("cannot print log root tree, invalid pointer")
			return nil
		}
		d.label("log root tree\n", "log root", id, nil, logRoot)
		d.tree(logRoot, true)
		return nil
	}
	d.rootItems(d.rootTree(), id)
	if logRoot != nil {
		lr := ctree.Root{Addr: d.sb.LogRoot, Level: int(d.sb.LogRootLevel), Owner: disk.TreeLogObjectID}
		d.rootItems(lr, id)
	}
	if o.Extents || o.Device || o.UUID {
		return nil
	}
	if o.Backups {
		d.backupRoots()
	}
	if d.o.JSON {
		d.p.jsonLine(obj{{"record", "totals"}, {"total_bytes", d.sb.TotalBytes}, {"bytes_used", d.sb.BytesUsed}, {"fsid", d.sb.FSID.String()}})
		return nil
	}
	d.p.printf("total bytes %d\nbytes used %d\nuuid %s\n", d.sb.TotalBytes, d.sb.BytesUsed, d.sb.FSID)
	return nil
}

// blockGroupRoot reads the root block of the block-group tree, or nil
// when the filesystem has no such tree (no compat_ro BLOCK_GROUP_TREE, as
// progs decides) or it cannot be found or read.
func (d *dumper) blockGroupRoot() disk.Node {
	if d.sb.CompatROFlags&disk.CompatROBlockGroupTree == 0 {
		return nil
	}
	c := ctree.NewCursor(d.r, d.rootTree())
	ok, err := c.Seek(disk.Key{ObjectID: disk.BlockGroupTreeObjectID, Type: disk.RootItemKey})
	if err != nil || !ok || c.Key().ObjectID != disk.BlockGroupTreeObjectID || c.Key().Type != disk.RootItemKey {
		return nil
	}
	v := view{b: c.Leaf(), off: disk.HeaderSize + int(c.Leaf().ItemHeader(c.Slot()).Offset)}
	n, err := d.read(v.u64(0xb0))
	if err != nil {
		return nil
	}
	return n
}

// label introduces a tree: text is the line progs prints; the JSON form is
// a "tree" record with the same facts.
func (d *dumper) label(text, name string, id disk.ObjectID, k *disk.Key, n disk.Node) {
	if !d.o.JSON {
		d.p.printf("%s", text)
		return
	}
	o := obj{{"record", "tree"}, {"name", name}, {"tree_id", uint64(id)}}
	if k != nil {
		o = o.add("key", keyJSON(*k))
	}
	d.p.jsonLine(o.add("bytenr", uint64(n.Bytenr())).add("level", n.Level()))
}

// superTrees prints the trees the superblock points to directly.
func (d *dumper) superTrees(root, chunkRoot, logRoot disk.Node) {
	trees := []struct {
		name string
		id   disk.ObjectID
		n    disk.Node
	}{{"root", disk.RootTreeObjectID, root}, {"chunk", disk.ChunkTreeObjectID, chunkRoot}, {"log root", disk.TreeLogObjectID, logRoot}}
	for _, t := range trees {
		if t.n == nil {
			continue
		}
		if d.o.Roots {
			d.label(fmt.Sprintf("%s tree: %d level %d\n", t.name, t.n.Bytenr(), t.n.Level()), t.name, t.id, nil, t.n)
			continue
		}
		d.label(t.name+" tree\n", t.name, t.id, nil, t.n)
		d.tree(t.n, true)
	}
}

// treeLabels name the trees of the ROOT_ITEM scan; other ids are "file".
var treeLabels = map[disk.ObjectID]string{
	disk.RootTreeObjectID: "root", disk.ExtentTreeObjectID: "extent", disk.ChunkTreeObjectID: "chunk",
	disk.DevTreeObjectID: "device", disk.FSTreeObjectID: "fs", disk.RootTreeDirObjectID: "directory",
	disk.CsumTreeObjectID: "checksum", disk.OrphanObjectID: "orphan", disk.TreeLogObjectID: "log",
	disk.TreeLogFixupObjectID: "log fixup", disk.TreeRelocObjectID: "reloc",
	disk.DataRelocTreeObjectID: "data reloc", disk.ExtentCsumObjectID: "extent checksum",
	disk.QuotaTreeObjectID: "quota", disk.UUIDTreeObjectID: "uuid", disk.FreeSpaceTreeObjectID: "free space",
	disk.BlockGroupTreeObjectID: "block group", disk.MultipleObjectIDs: "multiple",
}

// shown reports whether the tree id is printed under the -e/-d/-u
// restrictions (progs' skip rules).
func (d *dumper) shown(id disk.ObjectID) bool {
	o := d.o
	if !o.Extents && !o.Device && !o.UUID {
		return true
	}
	switch id {
	case disk.ExtentTreeObjectID:
		return o.Extents
	case disk.DevTreeObjectID:
		return o.Extents || o.Device
	case disk.UUIDTreeObjectID:
		return o.UUID
	case disk.RootTreeDirObjectID:
		return true
	}
	return false
}

// rootItems prints every tree with a ROOT_ITEM in the tree at root (the
// root tree or the log root tree), or only tree id when it is not 0.
func (d *dumper) rootItems(root ctree.Root, id disk.ObjectID) {
	c := ctree.NewCursor(d.r, root)
	ok, err := c.First()
	for ; ok && err == nil && d.p.err == nil; ok, err = c.Next() {
		k := c.Key()
		if k.Type != disk.RootItemKey {
			continue
		}
		v := view{b: c.Leaf(), off: disk.HeaderSize + int(c.Leaf().ItemHeader(c.Slot()).Offset)}
		buf, rerr := d.read(v.u64(0xb0))
		if rerr != nil || (id != 0 && k.ObjectID != id) || !d.shown(k.ObjectID) {
			continue
		}
		label, named := treeLabels[k.ObjectID]
		if !named {
			label = "file"
		}
		switch {
		case d.o.Extents:
			d.label(fmt.Sprintf("%s tree %s\n", label, keyString(k)), label, k.ObjectID, &k, buf)
			d.seen = map[uint64]bool{uint64(buf.Bytenr()): true}
			d.extents(buf)
		case d.o.Roots:
			d.label(fmt.Sprintf("%s tree %s %d level %d\n", label, keyString(k), buf.Bytenr(), buf.Level()), label, k.ObjectID, &k, buf)
		default:
			d.label(fmt.Sprintf("%s tree %s \n", label, keyString(k)), label, k.ObjectID, &k, buf)
			d.tree(buf, true)
		}
	}
	if err != nil {
		d.errorf("cannot read ROOT_ITEM from tree %d: %v", root.Owner, err)
	}
}

// backupRoots prints the superblock's backup roots (dump-tree -R).
func (d *dumper) backupRoots() {
	if d.o.JSON {
		roots := make([]obj, len(d.sb.BackupRoots))
		for i, b := range d.sb.BackupRoots {
			roots[i] = backupJSON(&b)
		}
		d.p.jsonLine(obj{{"record", "backup_roots"}, {"roots", roots}})
		return
	}
	for i, b := range d.sb.BackupRoots {
		d.p.printf("btrfs root backup slot %d\n", i)
		d.p.printf("\ttree root gen %d block %d\n", b.TreeRootGen, b.TreeRoot)
		d.p.printf("\t\textent root gen %d block %d\n", b.ExtentRootGen, b.ExtentRoot)
		d.p.printf("\t\tchunk root gen %d block %d\n", b.ChunkRootGen, b.ChunkRoot)
		d.p.printf("\t\tdevice root gen %d block %d\n", b.DevRootGen, b.DevRoot)
		d.p.printf("\t\tcsum root gen %d block %d\n", b.CsumRootGen, b.CsumRoot)
		d.p.printf("\t\tfs root gen %d block %d\n", b.FSRootGen, b.FSRoot)
		d.p.printf("\t\t%d used %d total %d devices\n", b.BytesUsed, b.TotalBytes, b.NumDevices)
	}
}
