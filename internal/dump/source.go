package dump

import (
	"fmt"

	"github.com/gobtrfs/btrfs/internal/blockdev"
	"github.com/gobtrfs/btrfs/internal/chunk"
	"github.com/gobtrfs/btrfs/internal/ctree"
	"github.com/gobtrfs/btrfs/internal/disk"
)

// LogicalReader reads logical ranges with mirror fallback; *chunk.Reader
// implements it.
type LogicalReader interface {
	ReadLogical(p []byte, logical disk.LogicalAddr, verify chunk.VerifyFunc) error
}

// NewSource returns a Source that reads tree blocks through lr and checks
// only what btrfs-progs checks before printing a block: the checksum, the
// address in the header, the fsid, and that key pointers or items lie in
// order within the block. Unlike the filesystem's reader it does not apply
// the tree-checker's item rules, so dump-tree can show damaged items.
func NewSource(lr LogicalReader, sb disk.Superblock) Source {
	return &lenient{lr: lr, sb: sb, params: disk.BlockParams{NodeSize: int(sb.NodeSize), CsumType: sb.CsumType, FSID: sb.MetadataFSID()}}
}

type lenient struct {
	lr     LogicalReader
	sb     disk.Superblock
	params disk.BlockParams
}

func (l *lenient) Superblock() disk.Superblock { return l.sb }
func (l *lenient) BlockReader() ctree.Reader   { return l }

// ReadBlock implements ctree.Reader.
func (l *lenient) ReadBlock(addr disk.LogicalAddr, e disk.Expect) (disk.Node, error) {
	if l.params.NodeSize < disk.HeaderSize || l.params.NodeSize > 1<<16 {
		return nil, fmt.Errorf("dump: node size %d out of range", l.params.NodeSize)
	}
	buf := make([]byte, l.params.NodeSize)
	verify := func(_ disk.LogicalAddr, b []byte) bool {
		return len(b) == len(buf) && l.params.CsumType.VerifyBlock(b) && disk.Node(b).Bytenr() == addr
	}
	if err := l.lr.ReadLogical(buf, addr, verify); err != nil {
		return nil, fmt.Errorf("read tree block %d: %w", addr, err)
	}
	n := disk.Node(buf)
	if err := n.Check(l.params, e); err != nil {
		return nil, err
	}
	return n, nil
}

// Image is a filesystem opened for dumping: its devices and a lenient
// Source over them.
type Image struct {
	Source
	set *blockdev.Set
}

// OpenImage opens the devices at paths (the first names the filesystem,
// the others are its other devices) and maps them with the superblock's
// system chunks and the chunk tree only. Unlike btrfs.Open it reads no
// other tree, so trees that are damaged can still be printed, as progs
// does. superFallback accepts a mirror superblock when the primary one is
// invalid.
func OpenImage(paths []string, superFallback bool) (*Image, error) {
	set, err := blockdev.ScanWith(paths, blockdev.ScanOptions{SuperFallback: superFallback})
	if err != nil {
		return nil, err
	}
	sb := *set.Super
	m, err := chunk.NewMapFromSuper(&sb)
	if err != nil {
		set.Close()
		return nil, err
	}
	src := NewSource(chunk.NewReader(m, set.Devices()), sb)
	root := ctree.Root{Addr: sb.ChunkRoot, Level: int(sb.ChunkRootLevel), Generation: sb.ChunkRootGeneration, Owner: disk.ChunkTreeObjectID}
	err = ctree.LoadChunkTree(src.BlockReader(), root, m)
	if err != nil {
		set.Close()
		return nil, fmt.Errorf("chunk tree: %w", err)
	}
	return &Image{Source: src, set: set}, nil
}

// Close closes the devices.
func (im *Image) Close() error { return im.set.Close() }
