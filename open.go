package btrfs

import (
	"errors"
	"fmt"

	"github.com/gobtrfs/btrfs/internal/blockdev"
	"github.com/gobtrfs/btrfs/internal/chunk"
	"github.com/gobtrfs/btrfs/internal/ctree"
	"github.com/gobtrfs/btrfs/internal/disk"
)

// Open opens the btrfs filesystem in the image file or block device at
// path, read-only. Other devices of a multi-device filesystem are given in
// opts.Devices; with some missing, reads go on wherever another copy or
// parity can serve them (like mount -o degraded,ro). opts may be nil.
func Open(path string, opts *Options) (*FS, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	set, err := blockdev.ScanWith(append([]string{path}, o.Devices...), blockdev.ScanOptions{SuperFallback: o.SuperFallback})
	if err != nil {
		if errors.Is(err, disk.ErrCorrupt) {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return nil, err
	}
	fsys, err := openSet(set, o)
	if err != nil {
		set.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return fsys, nil
}

// openSet bootstraps the filesystem from a scanned device set: the chunk
// map from the superblock's system chunks, then the chunk tree, then the
// root tree and the trees every read needs.
func openSet(set *blockdev.Set, o Options) (*FS, error) {
	sb := set.Super
	m, err := chunk.NewMapFromSuper(sb)
	if err != nil {
		return nil, err
	}
	paths := make(map[disk.DevID]string)
	for id, mem := range set.Members {
		paths[id] = mem.Path
	}
	cached := make(map[disk.DevID]blockdev.Device)
	raw := set.Devices()
	for id, d := range raw {
		c, err := blockdev.NewCache(d, blockdev.CacheOptions{Budget: o.cacheBytes() / 4})
		if err != nil {
			return nil, err
		}
		cached[id] = c
	}
	params := disk.BlockParams{NodeSize: int(sb.NodeSize), CsumType: sb.CsumType, FSID: sb.MetadataFSID(), SuperGen: sb.Generation}
	items := disk.ItemCheckParams{SectorSize: sb.SectorSize, NodeSize: sb.NodeSize, CsumType: sb.CsumType, SuperGen: sb.Generation}
	v := &volume{
		sb:       sb,
		br:       newBlockReader(chunk.NewReader(m, cached), params, items, o.cacheBytes()),
		data:     chunk.NewReader(m, raw),
		chunks:   m,
		devPaths: paths,
		opts:     o,
		subvols:  make(map[disk.ObjectID]*subvol),
		ext:      newExtentCache(8 << 20),
		closers:  []closerFunc{set.Close},
	}
	v.blocks = v.br
	chunkRoot := ctree.Root{Addr: sb.ChunkRoot, Level: int(sb.ChunkRootLevel), Generation: sb.ChunkRootGeneration, Owner: disk.ChunkTreeObjectID}
	if err := ctree.LoadChunkTree(v.blocks, chunkRoot, m); err != nil {
		return nil, fmt.Errorf("chunk tree: %w", err)
	}
	v.rootTree = ctree.Root{Addr: sb.Root, Level: int(sb.RootLevel), Generation: sb.Generation, Owner: disk.RootTreeObjectID}
	fsys := &FS{volume: v}
	if ri, err := fsys.rootItem(disk.CsumTreeObjectID); err == nil {
		v.csumRoot = ctree.Root{Addr: ri.Bytenr, Level: int(ri.Level), Generation: ri.Generation, Owner: disk.CsumTreeObjectID}
	} else if !errors.Is(err, errNoRoot) {
		return nil, fmt.Errorf("csum tree: %w", err)
	}
	if fsys.top, err = fsys.subvolume(disk.FSTreeObjectID); err != nil {
		return nil, fmt.Errorf("fs tree: %w", err)
	}
	// Like a mount, read the top directory now, so a filesystem whose
	// top-level tree is unreadable is refused at once.
	if _, err := fsys.rootInode(); err != nil {
		return nil, fmt.Errorf("fs tree: %w", err)
	}
	return fsys, nil
}

// closerFunc adapts a Close method value to io.Closer.
type closerFunc func() error

func (f closerFunc) Close() error { return f() }
