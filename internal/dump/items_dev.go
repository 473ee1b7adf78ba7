package dump

import (
	"github.com/gobtrfs/btrfs/internal/disk"
)

// Printers of chunk, device, quota, uuid and miscellaneous items.

func (p *printer) chunkItem(_ disk.Key, v view, _ int) { p.chunk(v) }

// chunk prints a btrfs_chunk and its stripes (also used for the
// superblock's sys_chunk_array).
func (p *printer) chunk(v view) {
	p.printf("\t\tlength %d owner %d stripe_len %d type %s\n", v.u64(0), v.u64(8), v.u64(16), blockGroupFlagsString(v.u64(24)))
	p.printf("\t\tio_align %d io_width %d sector_size %d\n", v.u32(32), v.u32(36), v.u32(40))
	n := int(v.u16(44))
	p.printf("\t\tnum_stripes %d sub_stripes %d\n", n, v.u16(46))
	// Stripes starting past the end of the block are not printed: progs
	// would show whatever memory follows its buffer there.
	for i := 0; i < n && p.err == nil; i++ {
		s := v.at(disk.ChunkItemBaseSize + disk.StripeSize*i)
		if s.off >= len(s.b) {
			break
		}
		p.printf("\t\t\tstripe %d devid %d offset %d\n", i, s.u64(0), s.u64(8))
		p.printf("\t\t\tdev_uuid %s\n", s.uuid(16))
	}
}

func (p *printer) devItem(_ disk.Key, v view, _ int) {
	p.printf("\t\tdevid %d total_bytes %d bytes_used %d\n", v.u64(0), v.u64(8), v.u64(16))
	p.printf("\t\tio_align %d io_width %d sector_size %d type %d\n", v.u32(24), v.u32(28), v.u32(32), v.u64(36))
	p.printf("\t\tgeneration %d start_offset %d dev_group %d\n", v.u64(44), v.u64(52), v.u32(60))
	p.printf("\t\tseek_speed %d bandwidth %d\n", v.u8(64), v.u8(65))
	p.printf("\t\tuuid %s\n\t\tfsid %s\n", v.uuid(66), v.uuid(82))
}

func (p *printer) devExtent(_ disk.Key, v view, _ int) {
	p.printf("\t\tdev extent chunk_tree %d\n", v.u64(0))
	p.printf("\t\tchunk_objectid %d chunk_offset %d length %d\n", v.u64(8), v.u64(16), v.u64(24))
	p.printf("\t\tchunk_tree_uuid %s\n", v.uuid(32))
}

func (p *printer) qgroupStatus(_ disk.Key, v view, _ int) {
	p.printf("\t\tversion %d generation %d flags %s scan %d\n", v.u64(0), v.u64(8), qgroupStatusFlagsString(v.u64(16)), v.u64(24))
}

func (p *printer) qgroupInfo(_ disk.Key, v view, _ int) {
	p.printf("\t\tgeneration %d\n", v.u64(0))
	p.printf("\t\treferenced %d referenced_compressed %d\n", v.u64(8), v.u64(16))
	p.printf("\t\texclusive %d exclusive_compressed %d\n", v.u64(24), v.u64(32))
}

// qgroupLimit prints the flags in hex without a prefix and the limits
// signed, as progs does.
func (p *printer) qgroupLimit(_ disk.Key, v view, _ int) {
	p.printf("\t\tflags %x\n", v.u64(0))
	p.printf("\t\tmax_referenced %d max_exclusive %d\n", int64(v.u64(8)), int64(v.u64(16)))
	p.printf("\t\trsv_referenced %d rsv_exclusive %d\n", int64(v.u64(24)), int64(v.u64(32)))
}

// uuidItem prints the subvolume ids of a UUID tree item. progs reports a
// size that is not a multiple of 8 on standard output, untabbed.
func (p *printer) uuidItem(_ disk.Key, v view, size int) {
	if size%8 != 0 {
		p.printf("btrfs: uuid item with illegal size %d!\n", size)
		return
	}
	for off := 0; off < size; off += 8 {
		p.printf("\t\tsubvol_id %d\n", v.u64(off))
	}
}

func (p *printer) stringItem(_ disk.Key, v view, size int) {
	p.printf("\t\titem data %s\n", v.cstr(0, size))
}

// persistentItem prints PERSISTENT_ITEMs: device statistics, and for
// longer items the counters progs does not know.
func (p *printer) persistentItem(k disk.Key, v view, size int) {
	p.printf("\t\tpersistent item objectid %s offset %d\n", objectIDString(uint64(k.ObjectID), k.Type), k.Offset)
	if k.ObjectID != disk.DevStatsObjectID {
		p.printf("\t\tunknown persistent item objectid %d\n", k.ObjectID)
		return
	}
	p.printf("\t\tdevice stats\n")
	p.printf("\t\twrite_errs %d read_errs %d flush_errs %d corruption_errs %d generation %d\n",
		v.u64(0), v.u64(8), v.u64(16), v.u64(24), v.u64(32))
	if size <= disk.DevStatsItemSize {
		return
	}
	// progs ends this line without a newline; the first counter follows it.
	p.printf("\t\tunknown stats item bytes %d", size-disk.DevStatsItemSize)
	for off := disk.DevStatsItemSize; off < size; off += 8 {
		p.printf("\t\tunknown item %d offset %d value %d\n", off/8, off, v.u64(off))
	}
}

// temporaryItem prints TEMPORARY_ITEMs: the balance status item.
func (p *printer) temporaryItem(k disk.Key, v view, _ int) {
	p.printf("\t\ttemporary item objectid %s offset %d\n", objectIDString(uint64(k.ObjectID), k.Type), k.Offset)
	if k.ObjectID != disk.BalanceObjectID {
		p.printf("\t\tunknown temporary item objectid %d\n", k.ObjectID)
		return
	}
	p.printf("\t\tbalance status flags %d\n", v.u64(0))
	for i, name := range []string{"DATA", "METADATA", "SYSTEM"} {
		p.printf("\t\t%s\n", name)
		p.balanceArgs(v.at(8 + disk.BalanceArgsSize*i))
	}
}

// balanceArgs prints a btrfs_disk_balance_args; usage and limit are shown
// as their two 32-bit halves.
func (p *printer) balanceArgs(v view) {
	p.printf("\t\tprofiles %d devid %d target %d flags %d\n", v.u64(0), v.u64(16), v.u64(56), v.u64(64))
	p.printf("\t\tusage_min %d usage_max %d pstart %d pend %d\n", v.u32(8), v.u32(12), v.u64(24), v.u64(32))
	p.printf("\t\tvstart %d vend %d limit_min %d limit_max %d\n", v.u64(40), v.u64(48), v.u32(72), v.u32(76))
	p.printf("\t\tstripes_min %d stripes_max %d\n", v.u32(80), v.u32(84))
}
