package dump

import (
	"fmt"
	"io"
	"slices"

	"github.com/gobtrfs/btrfs/internal/ctree"
	"github.com/gobtrfs/btrfs/internal/disk"
)

// ProgsBanner is the first line `btrfs inspect-internal dump-tree` prints.
// The gobtrfs command prints it too so the outputs compare equal.
const ProgsBanner = "btrfs-progs v6.2"

// Source is the filesystem the tree printers read: its superblock and a
// reader of tree blocks by logical address. *btrfs.FS satisfies it; so does
// the lenient reader of NewSource, which prints blocks whose items the
// filesystem's tree-checker would refuse.
type Source interface {
	Superblock() disk.Superblock
	BlockReader() ctree.Reader
}

// TreeOptions select what All, Tree and Blocks print; the fields mirror
// the options of dump-tree.
type TreeOptions struct {
	BlockOptions
	// DFS prints the children of a node depth first (--dfs); the default
	// is progs' breadth-first order: a node, then every block of the next
	// level, left to right, and so on down to the leaves.
	DFS bool
	// Follow makes Blocks print the subtree under each block (--follow).
	Follow bool
	// Extents prints only the leaves of the extent and device trees (-e).
	Extents bool
	// Device prints only the root, chunk and device trees (-d).
	Device bool
	// Roots prints one line per tree root instead of the trees (-r).
	Roots bool
	// Backups adds the superblock's backup roots to Roots (-R).
	Backups bool
	// UUID prints only the uuid tree (-u).
	UUID bool
	// JSON writes JSON lines instead of text (see the package doc).
	JSON bool
	// Errors receives the warnings and errors progs writes to standard
	// error (blocks that cannot be read, level mismatches); nil discards.
	Errors io.Writer
}

// dumper carries one dump-tree run.
type dumper struct {
	p   *printer
	r   ctree.Reader
	sb  disk.Superblock
	o   TreeOptions
	err io.Writer
	// seen holds the blocks printed under the tree being followed. A
	// valid tree never reaches a block twice; a damaged one could, and
	// without this a few looping pointers would multiply the output.
	seen map[uint64]bool
}

func newDumper(w io.Writer, src Source, o TreeOptions) *dumper {
	sb := src.Superblock()
	if o.CsumType == 0 && o.SectorSize == 0 {
		o.CsumType, o.SectorSize = sb.CsumType, sb.SectorSize
	}
	if o.Backups {
		o.Roots = true
	}
	e := o.Errors
	if e == nil {
		e = io.Discard
	}
	p := newPrinter(w, o.BlockOptions)
	p.json = o.JSON
	return &dumper{p: p, r: src.BlockReader(), sb: sb, o: o, err: e}
}

// errorf writes a progs-style message to the error stream.
func (d *dumper) errorf(format string, args ...any) {
	fmt.Fprintf(d.err, "ERROR: "+format+"\n", args...)
}

func (d *dumper) warnf(format string, args ...any) {
	fmt.Fprintf(d.err, "WARNING: "+format+"\n", args...)
}

// read reads a tree block knowing only its address, as progs does.
func (d *dumper) read(addr uint64) (disk.Node, error) {
	return d.r.ReadBlock(disk.LogicalAddr(addr), disk.Expect{Bytenr: disk.LogicalAddr(addr), Level: -1})
}

// Blocks prints the blocks at addrs (dump-tree -b) in ascending address
// order, each once, with its subtree when o.Follow is set. A block that
// cannot be read is reported on o.Errors and skipped; the error returned
// is the first write error.
func Blocks(w io.Writer, src Source, addrs []uint64, o TreeOptions) error {
	d := newDumper(w, src, o)
	sorted := slices.Clone(addrs)
	slices.Sort(sorted)
	for i, a := range sorted {
		if i > 0 && sorted[i-1] == a {
			d.warnf("tree block bytenr %d is duplicated", a)
			continue
		}
		n, err := d.read(a)
		if err != nil {
			d.errorf("failed to read tree block %d: %v", a, err)
			continue
		}
		d.tree(n, o.Follow)
	}
	return d.p.flush()
}

// tree prints a block and, with follow, every block under it.
func (d *dumper) tree(n disk.Node, follow bool) {
	d.seen = map[uint64]bool{uint64(n.Bytenr()): true}
	d.p.block(n)
	if !follow || n.IsLeaf() || d.p.err != nil {
		return
	}
	if d.o.DFS {
		d.dfsChildren(n)
	} else {
		d.bfsChildren(n)
	}
}

// childRef is one key pointer to follow: where it points and what its
// parent says about it.
type childRef struct {
	addr   uint64
	parent uint64 // parent bytenr
	slot   int
	level  int // expected level
	owner  disk.ObjectID
}

// refs lists the pointers of node n.
func refs(n disk.Node) []childRef {
	nr := min(n.NumItems(), disk.MaxKeyPtrs(len(n)))
	out := make([]childRef, nr)
	for i := range out {
		out[i] = childRef{addr: uint64(n.KeyPtr(i).BlockPtr), parent: uint64(n.Bytenr()), slot: i, level: n.Level() - 1, owner: n.Owner()}
	}
	return out
}

// child reads the block a pointer names and checks its level the way progs
// warns about it; ok is false if the child must be skipped.
func (d *dumper) child(ref childRef) (disk.Node, bool) {
	if d.seen[ref.addr] {
		d.warnf("tree block %d reached twice (parent %d slot %d), skipping it", ref.addr, ref.parent, ref.slot)
		return nil, false
	}
	d.seen[ref.addr] = true
	c, err := d.read(ref.addr)
	if err != nil {
		d.errorf("failed to read %d in tree %d: %v", ref.addr, ref.owner, err)
		return nil, false
	}
	if c.Level() != ref.level {
		d.warnf("eb corrupted: parent bytenr %d slot %d level %d child bytenr %d level has %d expect %d, skipping the slot",
			ref.parent, ref.slot, ref.level+1, ref.addr, c.Level(), ref.level)
		return nil, false
	}
	return c, true
}

func (d *dumper) dfsChildren(n disk.Node) {
	for _, ref := range refs(n) {
		if d.p.err != nil {
			return
		}
		if c, ok := d.child(ref); ok {
			d.p.block(c)
			if !c.IsLeaf() {
				d.dfsChildren(c)
			}
		}
	}
}

// bfsChildren prints the levels under n one after the other, each left to
// right. Only the pointers of the next level are kept, not its blocks.
func (d *dumper) bfsChildren(n disk.Node) {
	level := refs(n)
	for len(level) > 0 && d.p.err == nil {
		var next []childRef
		for _, ref := range level {
			if d.p.err != nil {
				return
			}
			c, ok := d.child(ref)
			if !ok {
				continue
			}
			d.p.block(c)
			if !c.IsLeaf() {
				next = append(next, refs(c)...)
			}
		}
		level = next
	}
}

// extents prints only the leaves under n, depth first (dump-tree -e).
func (d *dumper) extents(n disk.Node) {
	if n.IsLeaf() {
		d.p.block(n)
		return
	}
	for _, ref := range refs(n) {
		if d.p.err != nil {
			return
		}
		if c, ok := d.child(ref); ok {
			d.extents(c)
		}
	}
}
