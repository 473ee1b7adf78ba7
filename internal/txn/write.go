package txn

import (
	"fmt"

	"github.com/gobtrfs/btrfs/internal/ctree"
	"github.com/gobtrfs/btrfs/internal/disk"
)

// sealBlocks hands every dirty block to Write (which checksums it) and
// returns their addresses in order. Every block allocated in this
// transaction and still live must be among them: the extent tree already
// says it exists.
func (t *Txn) sealBlocks() ([]disk.LogicalAddr, error) {
	if _, err := t.tx.WriteDirty(); err != nil {
		return nil, err
	}
	if len(t.pending) != len(t.live) {
		return nil, fmt.Errorf("txn: %d blocks to write but %d live new blocks", len(t.pending), len(t.live))
	}
	addrs := sortedAddrs(t.pending)
	for _, a := range addrs {
		if _, ok := t.live[a]; !ok {
			return nil, fmt.Errorf("txn: block %d written but not live", a)
		}
	}
	return addrs, nil
}

// writeBlocks seals the transaction's blocks and writes them out now (no
// block cache: nothing could serve them from memory meanwhile), or, with
// a BlockCache, hands them to it pinned and leaves the device writes to
// the flight (Flight.Finish), outside the FS lock.
func (t *Txn) writeBlocks() error {
	addrs, err := t.sealBlocks()
	if err != nil {
		return err
	}
	c := t.fs.cache
	if c == nil {
		return t.fs.writeRuns(&t.fs.runBuf, int(t.fs.sb.NodeSize), addrs, t.pending) // Flight.Finish syncs them
	}
	// The next transaction and the read side read these blocks from the
	// cache until Finish has written them: the cache must keep them.
	for _, a := range addrs {
		c.Put(a, t.pending[a])
	}
	t.sealed = addrs
	return nil
}

// writeRuns writes the blocks at addrs (sorted) to every copy their chunk
// has, not synced. Blocks at consecutive addresses go out in one write per
// copy (up to maxRun bytes, gathered in *buf): a commit's blocks are
// mostly allocated in a row.
func (fs *FS) writeRuns(buf *[]byte, ns int, addrs []disk.LogicalAddr, blocks map[disk.LogicalAddr][]byte) error {
	const maxRun = 1 << 20
	for i := 0; i < len(addrs); {
		j := i + 1
		for j < len(addrs) && addrs[j] == addrs[j-1]+disk.LogicalAddr(ns) && (j-i+1)*ns <= maxRun {
			j++
		}
		run := blocks[addrs[i]]
		if j-i > 1 {
			if cap(*buf) < (j-i)*ns {
				*buf = make([]byte, maxRun)
			}
			run = (*buf)[:(j-i)*ns]
			for k := i; k < j; k++ {
				copy(run[(k-i)*ns:], blocks[addrs[k]])
			}
		}
		if err := fs.wr.WriteLogical(run, addrs[i]); err != nil {
			return fmt.Errorf("write tree blocks %d to %d: %w", addrs[i], addrs[j-1], err)
		}
		i = j
	}
	return nil
}

// currentRoot is the root of tree id at the end of the transaction: the
// running tree if it was opened, else its committed ROOT_ITEM; ok is false
// when the tree does not exist.
func (t *Txn) currentRoot(id disk.ObjectID) (ctree.Root, bool) {
	if tr := t.trees[id]; tr != nil {
		return tr.Root(), true
	}
	ri, _, err := t.fs.rootItem(id)
	if err != nil {
		return ctree.Root{}, false
	}
	return ctree.Root{Addr: ri.Bytenr, Level: int(ri.Level), Generation: ri.Generation, Owner: id}, true
}

// newSuper builds the superblock of this commit from the committed one.
func (t *Txn) newSuper() (disk.Superblock, error) {
	old := &t.fs.sb
	sb := *old
	if err := t.checkLogDropped(); err != nil {
		return sb, err
	}
	rr, _ := t.currentRoot(disk.RootTreeObjectID)
	if rr.Generation != t.gen {
		return sb, fmt.Errorf("txn: root tree root generation %d, transaction %d", rr.Generation, t.gen)
	}
	sb.Generation = t.gen
	sb.IncompatFlags |= t.incompat
	if t.label != nil {
		sb.Label = *t.label
	}
	sb.Root, sb.RootLevel = rr.Addr, uint8(rr.Level)
	if tr := t.trees[disk.ChunkTreeObjectID]; tr != nil {
		cr := tr.Root()
		sb.ChunkRoot, sb.ChunkRootLevel, sb.ChunkRootGeneration = cr.Addr, uint8(cr.Level), cr.Generation
	}
	var used uint64
	for _, g := range t.fs.space.Groups() {
		used += g.Used
	}
	sb.BytesUsed = used
	sb.LogRoot, sb.LogRootTransID, sb.LogRootLevel = 0, 0, 0
	sb.CacheGeneration = 0
	if old.UUIDTreeGeneration == old.Generation {
		sb.UUIDTreeGeneration = t.gen
	}
	sb.Flags |= disk.SuperFlagWritten
	if err := t.shrinkSuper(&sb); err != nil {
		return sb, fmt.Errorf("txn: shrink: %w", err)
	}
	slot := 0
	for i, b := range old.BackupRoots {
		if b.TreeRootGen == old.Generation {
			slot = (i + 1) % disk.NumBackupRoots
			break
		}
	}
	sb.BackupRoots[slot] = t.backupRoot(&sb)
	return sb, nil
}

// devItemsNow copies every member's dev_item, for writeSupers.
func (fs *FS) devItemsNow() map[disk.DevID]disk.DevItem {
	out := make(map[disk.DevID]disk.DevItem, len(fs.set.Members))
	for id, m := range fs.set.Members {
		out[id] = m.Super.DevItem
	}
	return out
}

// backupRoot records the roots of the commit in the backup-root format.
func (t *Txn) backupRoot(sb *disk.Superblock) disk.BackupRoot {
	b := disk.BackupRoot{TreeRoot: sb.Root, TreeRootGen: sb.Generation, TreeRootLevel: sb.RootLevel,
		ChunkRoot: sb.ChunkRoot, ChunkRootGen: sb.ChunkRootGeneration, ChunkRootLevel: sb.ChunkRootLevel,
		TotalBytes: sb.TotalBytes, BytesUsed: sb.BytesUsed, NumDevices: sb.NumDevices}
	if r, ok := t.currentRoot(disk.ExtentTreeObjectID); ok {
		b.ExtentRoot, b.ExtentRootGen, b.ExtentRootLevel = r.Addr, r.Generation, uint8(r.Level)
	}
	if r, ok := t.currentRoot(disk.FSTreeObjectID); ok {
		b.FSRoot, b.FSRootGen, b.FSRootLevel = r.Addr, r.Generation, uint8(r.Level)
	}
	if r, ok := t.currentRoot(disk.DevTreeObjectID); ok {
		b.DevRoot, b.DevRootGen, b.DevRootLevel = r.Addr, r.Generation, uint8(r.Level)
	}
	if r, ok := t.currentRoot(disk.CsumTreeObjectID); ok {
		b.CsumRoot, b.CsumRootGen, b.CsumRootLevel = r.Addr, r.Generation, uint8(r.Level)
	}
	return b
}

// writeSupers writes sb to every superblock copy that fits on every
// device, each with its own bytenr and dev_item and its own checksum,
// between two syncs: the tree blocks must be durable before any
// superblock points at them, and the commit is only done when the
// superblocks are durable.
//
// devItems are each device's dev_item as of the commit (devItemsNow):
// a later commit's Prepare may change the members' superblocks while
// this one's are written.
func (fs *FS) writeSupers(sb *disk.Superblock, devItems map[disk.DevID]disk.DevItem) error {
	for _, m := range fs.set.Members {
		if err := m.Device.Sync(); err != nil {
			return err
		}
	}
	buf := make([]byte, disk.SuperblockSize)
	for _, m := range fs.set.Members {
		for i := 0; i < disk.SuperMirrorMax; i++ {
			off := disk.SuperblockOffsetOf(i)
			if int64(off)+disk.SuperblockSize > m.Device.Size() {
				break
			}
			c := *sb
			c.Bytenr = off
			c.DevItem = devItems[m.DevID()]
			c.Encode(buf)
			sb.CsumType.SumBlock(buf)
			if _, err := m.Device.WriteAt(buf, int64(off)); err != nil {
				return fmt.Errorf("device %d superblock %d: %w", m.DevID(), i, err)
			}
		}
	}
	for _, m := range fs.set.Members {
		if err := m.Device.Sync(); err != nil {
			return err
		}
	}
	return nil
}
