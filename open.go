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
// Every change (Mkdir, WriteFile, File.WriteAt, Commit, ...) is refused
// with an error matching syscall.EROFS and fs.ErrPermission.
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
	if set.Super.LogRoot != 0 && !o.NoLogReplay {
		set.Close()
		return openReplayed(path, o)
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
	if err := set.CheckComplete(m.DevIDs()); err != nil {
		return nil, err
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
	v := newVolume(set, sb, m, cached, raw, o)
	v.closers = []closerFunc{set.Close}
	chunkRoot := ctree.Root{Addr: sb.ChunkRoot, Level: int(sb.ChunkRootLevel), Generation: sb.ChunkRootGeneration, Owner: disk.ChunkTreeObjectID}
	if err := ctree.LoadChunkTree(v.blocks, chunkRoot, m); err != nil {
		return nil, fmt.Errorf("chunk tree: %w", err)
	}
	if err := set.CheckComplete(m.DevIDs()); err != nil {
		return nil, fmt.Errorf("chunk tree: %w", err)
	}
	return openVolume(v)
}

// newVolume makes the read side over devices: cached for tree blocks, raw
// for file data (bulk reads would only evict tree blocks from a cache).
func newVolume(set *blockdev.Set, sb *disk.Superblock, m *chunk.Map, cached, raw map[disk.DevID]blockdev.Device, o Options) *volume {
	paths := make(map[disk.DevID]string)
	for id, mem := range set.Members {
		paths[id] = mem.Path
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
	}
	v.blocks = v.br
	return v
}

// openVolume finds the trees every read needs in a volume whose chunk map
// is complete.
func openVolume(v *volume) (*FS, error) {
	sb := v.sb
	v.rootTree = ctree.Root{Addr: sb.Root, Level: int(sb.RootLevel), Generation: sb.Generation, Owner: disk.RootTreeObjectID}
	fsys := &FS{volume: v}
	if err := fsys.loadCsumRoot(); err != nil {
		return nil, err
	}
	var err error
	if fsys.top, err = fsys.subvolume(disk.FSTreeObjectID); err != nil {
		if errors.Is(err, errNoRoot) {
			// Every btrfs has a top-level tree: its absence is damage.
			return nil, &disk.CorruptError{Logical: sb.Root, Tree: disk.RootTreeObjectID, What: "no root item for FS_TREE", Err: err}
		}
		return nil, fmt.Errorf("fs tree: %w", err)
	}
	// Like a mount, read the top directory now, so a filesystem whose
	// top-level tree is unreadable is refused at once.
	if _, err := fsys.rootInode(); err != nil {
		return nil, fmt.Errorf("fs tree: %w", err)
	}
	return fsys, nil
}

// loadCsumRoot finds the csum tree's root in the root tree.
func (fsys *FS) loadCsumRoot() error {
	fsys.csumRoot = ctree.Root{}
	if ri, err := fsys.rootItem(disk.CsumTreeObjectID); err == nil {
		fsys.csumRoot = ctree.Root{Addr: ri.Bytenr, Level: int(ri.Level), Generation: ri.Generation, Owner: disk.CsumTreeObjectID}
	} else if !errors.Is(err, errNoRoot) {
		return fmt.Errorf("csum tree: %w", err)
	}
	return nil
}

// closerFunc adapts a Close method value to io.Closer.
type closerFunc func() error

func (f closerFunc) Close() error { return f() }
