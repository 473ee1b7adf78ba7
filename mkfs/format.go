package mkfs

import (
	"errors"
	"fmt"
	"os"

	"github.com/gobtrfs/btrfs/internal/blockdev"
	"github.com/gobtrfs/btrfs/internal/chunk"
	"github.com/gobtrfs/btrfs/internal/disk"
)

// Format creates a new filesystem in the image file or block device at
// path. A missing image file is created with opts.Size bytes (sparse); an
// existing regular file shorter than opts.Size is extended. The device is
// synced before Format returns.
func Format(path string, opts Options) error {
	if opts.Size < 0 {
		return fmt.Errorf("mkfs: negative size %d", opts.Size)
	}
	_, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if opts.Size == 0 {
			return fmt.Errorf("mkfs: %s does not exist and no size was given", path)
		}
		d, err := blockdev.CreateFile(path, opts.Size)
		if err != nil {
			return fmt.Errorf("mkfs: %w", err)
		}
		return closeAfter(d, formatDevice(d, opts))
	case err != nil:
		return fmt.Errorf("mkfs: %w", err)
	}
	// OpenFileGrow extends a shorter file only once the file is ours:
	// one another writer has open, or the kernel has mounted, is refused
	// untouched.
	d, err := blockdev.OpenFileGrow(path, opts.Size)
	if err != nil {
		return fmt.Errorf("mkfs: %w", err)
	}
	return closeAfter(d, formatDevice(d, opts))
}

func closeAfter(d blockdev.Device, err error) error {
	if cerr := d.Close(); err == nil && cerr != nil {
		return fmt.Errorf("mkfs: close: %w", cerr)
	}
	return err
}

// formatDevice creates a new filesystem on dev, using its first
// opts.Size bytes (all of it when opts.Size is 0). It writes the tree
// blocks (every copy), syncs, writes every superblock copy that fits and
// syncs again. It does not close dev.
func formatDevice(dev blockdev.Device, opts Options) error {
	c, err := resolve(opts, dev.Size())
	if err != nil {
		return err
	}
	l, err := planLayout(c)
	if err != nil {
		return err
	}
	b, err := build(c, l)
	if err != nil {
		return err
	}
	m := chunk.NewMap(uint32(c.sectorSize))
	for _, p := range l.list {
		it := p.item
		if err := m.Add(p.logical, &it); err != nil {
			return fmt.Errorf("mkfs: chunk map: %w", err)
		}
	}
	if err := wipeStart(dev, c); err != nil {
		return err
	}
	w := chunk.NewWriter(m, map[disk.DevID]blockdev.Device{1: dev})
	for _, a := range b.s.sortedAddrs() {
		if err := w.WriteLogical(b.s.blocks[a], a); err != nil {
			return fmt.Errorf("mkfs: write tree block %d: %w", a, err)
		}
	}
	if err := dev.Sync(); err != nil {
		return fmt.Errorf("mkfs: sync: %w", err)
	}
	sb, err := b.superblock()
	if err != nil {
		return err
	}
	if err := writeSupers(dev, c, sb); err != nil {
		return err
	}
	return nil
}

// wipeStart zeroes the first MiB of the device (boot area, the primary
// superblock slot, other filesystems' signatures) as mkfs.btrfs does, so
// that nothing left from an earlier filesystem is mistaken for part of
// this one.
func wipeStart(dev blockdev.Device, c *config) error {
	n := min(uint64(disk.ReservedBytes), c.size)
	if _, err := dev.WriteAt(make([]byte, n), 0); err != nil {
		return fmt.Errorf("mkfs: wipe the first MiB: %w", err)
	}
	return nil
}

// superblock fills in the superblock of the new filesystem (bytenr and
// checksum are per copy).
func (b *builder) superblock() (*disk.Superblock, error) {
	c := b.c
	sb := &disk.Superblock{
		FSID: c.fsid, MetadataUUID: c.fsid, Flags: disk.SuperFlagWritten, Magic: disk.Magic,
		Generation: genFinal, Root: b.roots[disk.RootTreeObjectID].Addr, RootLevel: uint8(b.roots[disk.RootTreeObjectID].Level), ChunkRoot: b.addrs[disk.ChunkTreeObjectID],
		TotalBytes: c.size, BytesUsed: b.bytesUsed(), RootDirObjectID: disk.RootTreeDirObjectID, NumDevices: 1,
		SectorSize: uint32(c.sectorSize), NodeSize: uint32(c.nodeSize), LeafSize: uint32(c.nodeSize),
		StripeSize: uint32(c.sectorSize), ChunkRootGeneration: b.treeGen(disk.ChunkTreeObjectID),
		CompatROFlags: c.feat.compatRO(), IncompatFlags: c.feat.incompat(), CsumType: c.csum,
		DevItem: b.devItem(),
	}
	copy(sb.Label[:], c.label)
	// The sys_chunk_array holds the SYSTEM chunk, from which a reader
	// finds the chunk tree.
	sys := b.l.sys
	k := key(disk.FirstChunkTreeObjectID, disk.ChunkItemKey, uint64(sys.logical))
	k.Encode(sb.SysChunkArray[:])
	sys.item.Encode(sb.SysChunkArray[disk.KeySize:])
	sb.SysChunkArraySize = uint32(disk.KeySize + sys.item.Size())
	// progs (and the kernel) rotate backup slots so that generation g
	// lands in slot (g-1) mod 4; the other slots stay empty.
	br := &sb.BackupRoots[(genFinal-1)%disk.NumBackupRoots]
	*br = disk.BackupRoot{TreeRoot: sb.Root, TreeRootGen: genFinal, TreeRootLevel: sb.RootLevel, ChunkRoot: sb.ChunkRoot, ChunkRootGen: b.treeGen(disk.ChunkTreeObjectID),
		TotalBytes: sb.TotalBytes, BytesUsed: sb.BytesUsed, NumDevices: 1}
	br.ExtentRoot, br.ExtentRootGen = b.addrs[disk.ExtentTreeObjectID], b.treeGen(disk.ExtentTreeObjectID)
	br.FSRoot, br.FSRootGen = b.addrs[disk.FSTreeObjectID], b.treeGen(disk.FSTreeObjectID)
	br.DevRoot, br.DevRootGen = b.addrs[disk.DevTreeObjectID], b.treeGen(disk.DevTreeObjectID)
	br.CsumRoot, br.CsumRootGen = b.addrs[disk.CsumTreeObjectID], b.treeGen(disk.CsumTreeObjectID)
	chk := *sb
	chk.Bytenr = disk.SuperblockOffset
	if err := chk.Validate(disk.SuperblockOffset); err != nil {
		return nil, fmt.Errorf("mkfs: built superblock fails validation: %w", err)
	}
	return sb, nil
}

// writeSupers writes every superblock copy inside the filesystem, and
// zeroes copies past its end that the device still holds from an older
// filesystem, so that no scan finds a stale one. Syncs afterwards.
func writeSupers(dev blockdev.Device, c *config, sb *disk.Superblock) error {
	buf := make([]byte, disk.SuperblockSize)
	for i := 0; i < disk.SuperMirrorMax; i++ {
		off := disk.SuperblockOffsetOf(i)
		if int64(off)+disk.SuperblockSize > dev.Size() {
			break
		}
		clear(buf)
		if uint64(off)+disk.SuperblockSize <= c.size {
			cp := *sb
			cp.Bytenr = off
			cp.Encode(buf)
			c.csum.SumBlock(buf)
		}
		if _, err := dev.WriteAt(buf, int64(off)); err != nil {
			return fmt.Errorf("mkfs: superblock %d: %w", i, err)
		}
	}
	if err := dev.Sync(); err != nil {
		return fmt.Errorf("mkfs: sync: %w", err)
	}
	return nil
}
