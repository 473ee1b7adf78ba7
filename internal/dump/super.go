package dump

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"io"

	"github.com/gobtrfs/btrfs/internal/disk"
)

// SuperOptions say how Super prints a superblock.
type SuperOptions struct {
	// Full adds the sys_chunk_array and the backup roots (dump-super -f).
	Full bool
	// Errors receives the errors progs writes to standard error while
	// decoding the sys_chunk_array; nil discards them.
	Errors io.Writer
}

// SuperHeader prints the two lines dump-super writes before each copy:
// where it was read from, and a rule.
func SuperHeader(w io.Writer, bytenr uint64, device string) error {
	_, err := fmt.Fprintf(w, "superblock: bytenr=%d, device=%s\n---------------------------------------------------------\n", bytenr, device)
	return err
}

// Super prints a superblock the way `btrfs inspect-internal dump-super`
// of btrfs-progs 6.2 does after its header lines (see SuperHeader), field
// by field, whether or not it is valid: the checksum and magic are shown
// with [match] or [DON'T MATCH]. raw is the 4096 bytes read from the
// device (needed for the checksum); if nil, sb is encoded instead.
func Super(w io.Writer, sb *disk.Superblock, raw []byte, o SuperOptions) error {
	if len(raw) < disk.SuperblockSize {
		raw = make([]byte, disk.SuperblockSize)
		sb.Encode(raw)
	}
	p := newPrinter(w, BlockOptions{CsumType: sb.CsumType})
	e := o.Errors
	if e == nil {
		e = io.Discard
	}
	sp := superPrinter{p: p, sb: sb, raw: raw, v: view{b: raw}, errw: e}
	sp.print(o.Full)
	return p.flush()
}

type superPrinter struct {
	p    *printer
	sb   *disk.Superblock
	raw  []byte
	v    view
	errw io.Writer
}

// csumNames are the csum_type names progs prints.
var csumNames = []string{"crc32c", "xxhash64", "sha256", "blake2"}

func (s *superPrinter) print(full bool) {
	p, sb := s.p, s.sb
	s.csum()
	p.printf("bytenr\t\t\t%d\n", sb.Bytenr)
	p.printf("flags\t\t\t0x%x\n", sb.Flags)
	readableFlags(p, sb.Flags, superFlagEntries, superFlagsKnown, false)
	p.printf("magic\t\t\t%s", printable(s.raw[0x40:0x48]))
	s.match(sb.Magic == disk.Magic)
	metaUUID := sb.IncompatFlags&disk.IncompatMetadataUUID != 0
	p.printf("fsid\t\t\t%s\n", sb.FSID)
	if metaUUID {
		p.printf("metadata_uuid\t\t%s\n", sb.MetadataUUID)
	} else {
		p.printf("metadata_uuid\t\t%s\n", sb.FSID)
	}
	label := sb.Label[:]
	if i := bytes.IndexByte(label, 0); i >= 0 {
		label = label[:i]
	}
	p.printf("label\t\t\t%s\n", printable(label))
	s.numbers()
	p.printf("dev_item.uuid\t\t%s\n", sb.DevItem.UUID)
	want := sb.FSID
	if metaUUID {
		want = sb.MetadataUUID
	}
	p.printf("dev_item.fsid\t\t%s", sb.DevItem.FSID)
	s.match(sb.DevItem.FSID == want)
	s.devItem()
	if full {
		p.printf("sys_chunk_array[%d]:\n", disk.SysChunkArrayMax)
		s.sysChunkArray()
		p.printf("backup_roots[%d]:\n", disk.NumBackupRoots)
		s.backupRoots()
	}
}

func (s *superPrinter) match(ok bool) {
	if ok {
		s.p.printf(" [match]\n")
	} else {
		s.p.printf(" [DON'T MATCH]\n")
	}
}

// csum prints the checksum type, size and value, and whether the value
// matches the superblock's contents.
func (s *superPrinter) csum() {
	p, t := s.p, s.sb.CsumType
	name, size := "INVALID", disk.CsumFieldSize
	if t.Valid() {
		name, size = csumNames[t], t.Size()
	}
	p.printf("csum_type\t\t%d (%s)\n", uint16(t), name)
	p.printf("csum_size\t\t%d\n", size)
	p.printf("csum\t\t\t0x%s", hex.EncodeToString(s.raw[:size]))
	switch {
	case !t.Valid():
		p.printf(" [UNKNOWN CSUM TYPE OR SIZE]\n")
	default:
		s.match(t.VerifyBlock(s.raw[:disk.SuperblockSize]))
	}
}

func (s *superPrinter) numbers() {
	p, sb := s.p, s.sb
	p.printf("generation\t\t%d\n", sb.Generation)
	p.printf("root\t\t\t%d\n", sb.Root)
	p.printf("sys_array_size\t\t%d\n", sb.SysChunkArraySize)
	p.printf("chunk_root_generation\t%d\n", sb.ChunkRootGeneration)
	p.printf("root_level\t\t%d\n", sb.RootLevel)
	p.printf("chunk_root\t\t%d\n", sb.ChunkRoot)
	p.printf("chunk_root_level\t%d\n", sb.ChunkRootLevel)
	p.printf("log_root\t\t%d\n", sb.LogRoot)
	p.printf("log_root_transid (deprecated)\t%d\n", sb.LogRootTransID)
	p.printf("log_root_level\t\t%d\n", sb.LogRootLevel)
	p.printf("total_bytes\t\t%d\n", sb.TotalBytes)
	p.printf("bytes_used\t\t%d\n", sb.BytesUsed)
	p.printf("sectorsize\t\t%d\n", sb.SectorSize)
	p.printf("nodesize\t\t%d\n", sb.NodeSize)
	p.printf("leafsize (deprecated)\t%d\n", sb.LeafSize)
	p.printf("stripesize\t\t%d\n", sb.StripeSize)
	p.printf("root_dir\t\t%d\n", sb.RootDirObjectID)
	p.printf("num_devices\t\t%d\n", sb.NumDevices)
	p.printf("compat_flags\t\t0x%x\n", sb.CompatFlags)
	p.printf("compat_ro_flags\t\t0x%x\n", sb.CompatROFlags)
	readableFlags(p, sb.CompatROFlags, compatROEntries, compatROKnown, false)
	p.printf("incompat_flags\t\t0x%x\n", sb.IncompatFlags)
	readableFlags(p, sb.IncompatFlags, incompatEntries, incompatKnown, true)
	p.printf("cache_generation\t%d\n", sb.CacheGeneration)
	p.printf("uuid_tree_generation\t%d\n", sb.UUIDTreeGeneration)
}

func (s *superPrinter) devItem() {
	p, d := s.p, &s.sb.DevItem
	p.printf("dev_item.type\t\t%d\n", d.Type)
	p.printf("dev_item.total_bytes\t%d\n", d.TotalBytes)
	p.printf("dev_item.bytes_used\t%d\n", d.BytesUsed)
	p.printf("dev_item.io_align\t%d\n", d.IOAlign)
	p.printf("dev_item.io_width\t%d\n", d.IOWidth)
	p.printf("dev_item.sector_size\t%d\n", d.SectorSize)
	p.printf("dev_item.devid\t\t%d\n", d.DevID)
	p.printf("dev_item.dev_group\t%d\n", d.DevGroup)
	p.printf("dev_item.seek_speed\t%d\n", d.SeekSpeed)
	p.printf("dev_item.bandwidth\t%d\n", d.Bandwidth)
	p.printf("dev_item.generation\t%d\n", d.Generation)
}

// printable replaces what C's isprint rejects by '.'.
func printable(b []byte) string {
	out := make([]byte, len(b))
	for i, c := range b {
		if c < 0x20 || c > 0x7e {
			c = '.'
		}
		out[i] = c
	}
	return string(out)
}

// sysArrayOffset is where the sys_chunk_array starts in the superblock.
const sysArrayOffset = 0x32b

// sysChunkArray prints the chunks of the sys_chunk_array, stopping with an
// error message (on the error stream) where progs does.
func (s *superPrinter) sysChunkArray() {
	size := int(s.sb.SysChunkArraySize)
	if size > disk.SysChunkArrayMax {
		fmt.Fprintf(s.errw, "ERROR: sys_array_size %d shouldn't exceed %d bytes\n", size, disk.SysChunkArrayMax)
		return
	}
	short := func(n, at int) {
		fmt.Fprintf(s.errw, "ERROR: sys_array too short to read %d bytes at offset %d\n", n, at)
	}
	for cur, item := 0, 0; cur < size; item++ {
		if cur+disk.KeySize > size {
			short(disk.KeySize, cur)
			return
		}
		k := s.v.key(sysArrayOffset + cur)
		cur += disk.KeySize
		s.p.printf("\titem %d %s\n", item, keyString(k))
		if k.Type != disk.ChunkItemKey {
			fmt.Fprintf(s.errw, "ERROR: unexpected item type %d in sys_array at offset %d\n", k.Type, cur)
			return
		}
		if cur+disk.ChunkItemSize(1) > size {
			short(disk.ChunkItemSize(1), cur)
			return
		}
		c := s.v.at(sysArrayOffset + cur)
		n := int(c.u16(44))
		if n == 0 {
			fmt.Fprintf(s.errw, "ERROR: invalid number of stripes %d in sys_array at offset %d\n", n, cur)
			return
		}
		if cur+disk.ChunkItemSize(n) > size {
			short(disk.ChunkItemSize(n), cur)
			return
		}
		s.p.chunk(c)
		cur += disk.ChunkItemSize(n)
	}
}

// backupRoots prints the backup root slots, skipping unused ones (no tree
// root address nor generation). On extent-tree-v2 filesystems the extent
// root slot holds the block group tree.
func (s *superPrinter) backupRoots() {
	extentLabel := "backup_extent_root:\t"
	if s.sb.IncompatFlags&disk.IncompatExtentTreeV2 != 0 {
		extentLabel = "backup_block_group_root:\t"
	}
	for i, b := range s.sb.BackupRoots {
		if b.TreeRoot == 0 && b.TreeRootGen == 0 {
			continue
		}
		p := s.p
		p.printf("\tbackup %d:\n", i)
		p.printf("\t\tbackup_tree_root:\t%d\tgen: %d\tlevel: %d\n", b.TreeRoot, b.TreeRootGen, b.TreeRootLevel)
		p.printf("\t\tbackup_chunk_root:\t%d\tgen: %d\tlevel: %d\n", b.ChunkRoot, b.ChunkRootGen, b.ChunkRootLevel)
		p.printf("\t\t%s%d\tgen: %d\tlevel: %d\n", extentLabel, b.ExtentRoot, b.ExtentRootGen, b.ExtentRootLevel)
		p.printf("\t\tbackup_fs_root:\t\t%d\tgen: %d\tlevel: %d\n", b.FSRoot, b.FSRootGen, b.FSRootLevel)
		p.printf("\t\tbackup_dev_root:\t%d\tgen: %d\tlevel: %d\n", b.DevRoot, b.DevRootGen, b.DevRootLevel)
		p.printf("\t\tcsum_root:\t%d\tgen: %d\tlevel: %d\n", b.CsumRoot, b.CsumRootGen, b.CsumRootLevel)
		p.printf("\t\tbackup_total_bytes:\t%d\n", b.TotalBytes)
		p.printf("\t\tbackup_bytes_used:\t%d\n", b.BytesUsed)
		p.printf("\t\tbackup_num_devices:\t%d\n\n", b.NumDevices)
	}
}

// flagEntry names one bit of a superblock flag word for dump-super.
type flagEntry struct {
	bit  uint64
	name string
}

// The flag names dump-super prints, in its order, and the bits it does not
// call unknown. These differ from the format's full lists: progs 6.2 names
// only these, knows VERITY without naming it, and calls EXTENT_TREE_V2
// unknown even when it names it.
var (
	superFlagEntries = []flagEntry{
		{disk.SuperFlagWritten, "WRITTEN"}, {1 << 1, "RELOC"}, {disk.SuperFlagChangingFSID, "CHANGING_FSID"},
		{disk.SuperFlagSeeding, "SEEDING"}, {disk.SuperFlagMetadump, "METADUMP"}, {disk.SuperFlagMetadumpV2, "METADUMP_V2"},
	}
	superFlagsKnown = disk.SuperFlagWritten | 1<<1 | disk.SuperFlagChangingFSID | disk.SuperFlagSeeding |
		disk.SuperFlagMetadump | disk.SuperFlagMetadumpV2
	compatROEntries = []flagEntry{
		{disk.CompatROFreeSpaceTree, "FREE_SPACE_TREE"}, {disk.CompatROFreeSpaceTreeValid, "FREE_SPACE_TREE_VALID"},
		{disk.CompatROBlockGroupTree, "BLOCK_GROUP_TREE"},
	}
	compatROKnown   = uint64(0xf)
	incompatEntries = []flagEntry{
		{disk.IncompatMixedBackref, "MIXED_BACKREF"}, {disk.IncompatDefaultSubvol, "DEFAULT_SUBVOL"},
		{disk.IncompatMixedGroups, "MIXED_GROUPS"}, {disk.IncompatCompressLZO, "COMPRESS_LZO"},
		{disk.IncompatCompressZstd, "COMPRESS_ZSTD"}, {disk.IncompatBigMetadata, "BIG_METADATA"},
		{disk.IncompatExtendedIref, "EXTENDED_IREF"}, {disk.IncompatRAID56, "RAID56"},
		{disk.IncompatSkinnyMetadata, "SKINNY_METADATA"}, {disk.IncompatNoHoles, "NO_HOLES"},
		{disk.IncompatMetadataUUID, "METADATA_UUID"}, {disk.IncompatRAID1C34, "RAID1C34"},
		{disk.IncompatZoned, "ZONED"}, {disk.IncompatExtentTreeV2, "EXTENT_TREE_V2"},
	}
	incompatKnown = uint64(1<<13 - 1)
)

// readableFlags prints the "( A |\n  B )" block under a flag word. With
// lastNeedsCompany the last entry (EXTENT_TREE_V2) is named only after
// another name, which is what progs 6.2 prints.
func readableFlags(p *printer, f uint64, entries []flagEntry, known uint64, lastNeedsCompany bool) {
	if f == 0 {
		return
	}
	p.printf("\t\t\t( ")
	first := true
	for i, e := range entries {
		if f&e.bit == 0 || (lastNeedsCompany && i == len(entries)-1 && first) {
			continue
		}
		if first {
			p.printf("%s ", e.name)
		} else {
			p.printf("|\n\t\t\t  %s ", e.name)
		}
		first = false
	}
	if rest := f &^ known; rest != 0 {
		if first {
			p.printf("unknown flag: 0x%x ", rest)
		} else {
			p.printf("|\n\t\t\t  unknown flag: 0x%x ", rest)
		}
	}
	p.printf(")\n")
}
