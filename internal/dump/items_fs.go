package dump

import (
	"github.com/gobtrfs/btrfs/internal/disk"
)

// Printers of the items of subvolume trees: inodes, names, directory
// entries, xattrs and file extents. Field offsets are those of the on-disk
// structures (see internal/disk).

func (p *printer) timespec(label string, v view) {
	p.printf("\t\t%s %s\n", label, timespecString(v.u64(0), v.u32(8), p.o.Location))
}

// inodeFields prints a btrfs_inode_item (also embedded in root items).
func (p *printer) inodeItem(_ disk.Key, v view, _ int) {
	p.printf("\t\tgeneration %d transid %d size %d nbytes %d\n", v.u64(0), v.u64(0x08), v.u64(0x10), v.u64(0x18))
	p.printf("\t\tblock group %d mode %o links %d uid %d gid %d rdev %d\n",
		v.u64(0x20), v.u32(0x34), v.u32(0x28), v.u32(0x2c), v.u32(0x30), v.u64(0x38))
	flags := v.u64(0x40)
	p.printf("\t\tsequence %d flags 0x%x(%s)\n", v.u64(0x48), flags, inodeFlagsString(flags))
	p.timespec("atime", v.at(0x70))
	p.timespec("ctime", v.at(0x7c))
	p.timespec("mtime", v.at(0x88))
	p.timespec("otime", v.at(0x94))
}

// shownName is a name as printed, or HIDDEN under --hide-names.
func (p *printer) shownName(v view, rel, n int) string {
	if p.o.HideNames {
		return "HIDDEN"
	}
	return v.name(rel, n)
}

func (p *printer) inodeRef(_ disk.Key, v view, size int) {
	for cur := 0; cur < size; {
		e := v.at(cur)
		n := int(e.u16(8))
		p.printf("\t\tindex %d namelen %d name: %s\n", e.u64(0), n, p.shownName(e, disk.InodeRefBaseSize, n))
		cur += disk.InodeRefBaseSize + n
	}
}

func (p *printer) inodeExtref(_ disk.Key, v view, size int) {
	for cur := 0; cur < size; {
		e := v.at(cur)
		n := int(e.u16(16))
		p.printf("\t\tindex %d parent %d namelen %d name: %s\n", e.u64(8), e.u64(0), n, p.shownName(e, disk.InodeExtrefBaseSize, n))
		cur += disk.InodeExtrefBaseSize + n
	}
}

// dirItem prints every entry of a DIR_ITEM, DIR_INDEX or XATTR_ITEM.
func (p *printer) dirItem(_ disk.Key, v view, size int) {
	for cur := 0; cur < size; {
		e := v.at(cur)
		dataLen, nameLen := int(e.u16(0x19)), int(e.u16(0x1b))
		p.printf("\t\tlocation %s type %s\n", keyString(e.key(0)), dirTypeString(e.u8(0x1d)))
		p.printf("\t\ttransid %d data_len %d name_len %d\n", e.u64(0x11), dataLen, nameLen)
		p.printf("\t\tname: %s\n", p.shownName(e, disk.DirItemBaseSize, nameLen))
		if dataLen > 0 {
			p.printf("\t\tdata %s\n", p.shownName(e, disk.DirItemBaseSize+nameLen, dataLen))
		}
		cur += disk.DirItemBaseSize + nameLen + dataLen
	}
}

func (p *printer) dirLog(_ disk.Key, v view, _ int) {
	p.printf("\t\tdir log end %d\n", v.u64(0))
}

func (p *printer) fileExtent(_ disk.Key, v view, size int) {
	typ := v.u8(0x14)
	comp := v.u8(0x10)
	p.printf("\t\tgeneration %d type %d (%s)\n", v.u64(0), typ, fileExtentTypeString(typ))
	switch typ {
	case uint8(disk.FileExtentInline):
		p.printf("\t\tinline extent data size %d ram_bytes %d compression %d (%s)\n",
			uint32(size-disk.FileExtentInlineDataStart), v.u64(0x08), comp, compressString(comp))
	case uint8(disk.FileExtentPrealloc):
		p.printf("\t\tprealloc data disk byte %d nr %d\n", v.u64(0x15), v.u64(0x1d))
		p.printf("\t\tprealloc data offset %d nr %d\n", v.u64(0x25), v.u64(0x2d))
	default:
		p.printf("\t\textent data disk byte %d nr %d\n", v.u64(0x15), v.u64(0x1d))
		p.printf("\t\textent data offset %d nr %d ram %d\n", v.u64(0x25), v.u64(0x2d), v.u64(0x08))
		p.printf("\t\textent compression %d (%s)\n", comp, compressString(comp))
	}
}

// rootItem prints a btrfs_root_item, with the uuid and time lines only
// when generation_v2 is current. progs copies at most the item's size into
// a zeroed structure and prints from that copy, so fields past a short
// (legacy) item read as zero, except the four times, which it reads from
// the block like other items.
func (p *printer) rootItem(_ disk.Key, v view, size int) {
	r := v.zeroFilled(size, disk.RootItemSize)
	flags := r.u64(0xd0)
	flagName := "none"
	if flags&uint64(disk.RootSubvolReadonly) != 0 {
		flagName = "RDONLY"
	}
	p.printf("\t\tgeneration %d root_dirid %d bytenr %d byte_limit %d bytes_used %d\n",
		r.u64(0xa0), r.u64(0xa8), r.u64(0xb0), r.u64(0xb8), r.u64(0xc0))
	p.printf("\t\tlast_snapshot %d flags 0x%x(%s) refs %d\n", r.u64(0xc8), flags, flagName, r.u32(0xd8))
	p.printf("\t\tdrop_progress %s drop_level %d\n", keyString(r.key(0xdc)), r.u8(0xed))
	p.printf("\t\tlevel %d generation_v2 %d\n", r.u8(0xee), r.u64(0xef))
	if r.u64(0xa0) != r.u64(0xef) {
		return
	}
	p.printf("\t\tuuid %s\n", r.uuid(0xf7))
	p.printf("\t\tparent_uuid %s\n", r.uuid(0x107))
	p.printf("\t\treceived_uuid %s\n", r.uuid(0x117))
	p.printf("\t\tctransid %d otransid %d stransid %d rtransid %d\n", r.u64(0x127), r.u64(0x12f), r.u64(0x137), r.u64(0x13f))
	p.timespec("ctime", v.at(0x147))
	p.timespec("otime", v.at(0x153))
	p.timespec("stime", v.at(0x15f))
	p.timespec("rtime", v.at(0x16b))
}

// rootRef prints ROOT_REF and ROOT_BACKREF items; progs shows these names
// even under --hide-names.
func (p *printer) rootRef(k disk.Key, v view, _ int) {
	tag := "ref"
	if k.Type == disk.RootBackrefKey {
		tag = "backref"
	}
	p.printf("\t\troot %s key dirid %d sequence %d name %s\n", tag, v.u64(0), v.u64(8), v.name(disk.RootRefBaseSize, int(v.u16(16))))
}
