package disk

import "fmt"

// Fixed parts of the name entries packed into INODE_REF and INODE_EXTREF items.
const (
	InodeRefBaseSize    = 10 // struct btrfs_inode_ref: index u64, name_len u16
	InodeExtrefBaseSize = 18 // struct btrfs_inode_extref: parent u64, index u64, name_len u16
	// NameMax is BTRFS_NAME_LEN, the longest file or xattr name.
	NameMax = 255
)

// InodeRef is one entry of an INODE_REF item, struct btrfs_inode_ref
// (10 bytes + name). The item key is (inode, INODE_REF, parent dir); all
// names of the inode in that directory are packed into the one item.
type InodeRef struct {
	Index uint64 // 0x00 DIR_INDEX offset of this name in the parent
	Name  []byte // 0x0a, length in the u16 at 0x08
}

// Size is the encoded size of the entry.
func (r *InodeRef) Size() int { return InodeRefBaseSize + len(r.Name) }

// InodeExtref is one entry of an INODE_EXTREF item, struct
// btrfs_inode_extref (18 bytes + name). The key is (inode, INODE_EXTREF,
// ExtrefHash(parent, name)); entries whose hashes collide share an item.
type InodeExtref struct {
	Parent ObjectID // 0x00 parent directory inode
	Index  uint64   // 0x08 DIR_INDEX offset of this name in the parent
	Name   []byte   // 0x12, length in the u16 at 0x10
}

// Size is the encoded size of the entry.
func (r *InodeExtref) Size() int { return InodeExtrefBaseSize + len(r.Name) }

// cloneTight copies b so that decoded names do not alias a cached block.
func cloneTight(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return append(make([]byte, 0, len(b)), b...)
}

// ParseInodeRefs decodes every entry of an INODE_REF item. The entries must
// tile the item exactly. Names are copies, not views of b.
func ParseInodeRefs(b []byte) ([]InodeRef, error) {
	buf := cloneTight(b)
	var refs []InodeRef
	for off := 0; off < len(buf); {
		if len(buf)-off < InodeRefBaseSize {
			return nil, Corruptf("inode ref at byte %d: %d bytes left, need %d", off, len(buf)-off, InodeRefBaseSize)
		}
		n := int(le.Uint16(buf[off+8:]))
		end := off + InodeRefBaseSize + n
		if end > len(buf) {
			return nil, Corruptf("inode ref at byte %d: name of %d bytes overruns item of %d", off, n, len(buf))
		}
		refs = append(refs, InodeRef{Index: le.Uint64(buf[off:]), Name: buf[off+InodeRefBaseSize : end : end]})
		off = end
	}
	return refs, nil
}

// InodeRefsSize is the item size holding refs.
func InodeRefsSize(refs []InodeRef) int {
	n := 0
	for i := range refs {
		n += refs[i].Size()
	}
	return n
}

// EncodeInodeRefs packs refs into b, which must hold InodeRefsSize(refs)
// bytes. Names longer than 65535 bytes are a caller bug and panic.
func EncodeInodeRefs(b []byte, refs []InodeRef) {
	off := 0
	for i := range refs {
		r := &refs[i]
		p := b[off : off+r.Size()]
		le.PutUint64(p, r.Index)
		le.PutUint16(p[8:], nameLen16(r.Name))
		copy(p[InodeRefBaseSize:], r.Name)
		off += len(p)
	}
}

// ParseInodeExtrefs decodes every entry of an INODE_EXTREF item. The
// entries must tile the item exactly. Names are copies, not views of b.
func ParseInodeExtrefs(b []byte) ([]InodeExtref, error) {
	buf := cloneTight(b)
	var refs []InodeExtref
	for off := 0; off < len(buf); {
		if len(buf)-off < InodeExtrefBaseSize {
			return nil, Corruptf("inode extref at byte %d: %d bytes left, need %d", off, len(buf)-off, InodeExtrefBaseSize)
		}
		n := int(le.Uint16(buf[off+16:]))
		end := off + InodeExtrefBaseSize + n
		if end > len(buf) {
			return nil, Corruptf("inode extref at byte %d: name of %d bytes overruns item of %d", off, n, len(buf))
		}
		refs = append(refs, InodeExtref{
			Parent: ObjectID(le.Uint64(buf[off:])),
			Index:  le.Uint64(buf[off+8:]),
			Name:   buf[off+InodeExtrefBaseSize : end : end],
		})
		off = end
	}
	return refs, nil
}

// InodeExtrefsSize is the item size holding refs.
func InodeExtrefsSize(refs []InodeExtref) int {
	n := 0
	for i := range refs {
		n += refs[i].Size()
	}
	return n
}

// EncodeInodeExtrefs packs refs into b, which must hold
// InodeExtrefsSize(refs) bytes.
func EncodeInodeExtrefs(b []byte, refs []InodeExtref) {
	off := 0
	for i := range refs {
		r := &refs[i]
		p := b[off : off+r.Size()]
		le.PutUint64(p, uint64(r.Parent))
		le.PutUint64(p[8:], r.Index)
		le.PutUint16(p[16:], nameLen16(r.Name))
		copy(p[InodeExtrefBaseSize:], r.Name)
		off += len(p)
	}
}

// nameLen16 returns len(b) for a u16 length field (names, xattr values);
// longer fields cannot be encoded and reaching here with one is a bug.
func nameLen16(b []byte) uint16 {
	if len(b) > 0xffff {
		panic(fmt.Sprintf("disk: field of %d bytes does not fit a u16 length", len(b)))
	}
	return uint16(len(b))
}

// InodeRefs is the payload of an INODE_REF item: its packed entries.
type InodeRefs []InodeRef

// Decode replaces r with the entries of the item b.
func (r *InodeRefs) Decode(b []byte) error {
	refs, err := ParseInodeRefs(b)
	*r = refs
	return err
}

// Size is the item size.
func (r *InodeRefs) Size() int { return InodeRefsSize(*r) }

// Encode packs the entries into b.
func (r *InodeRefs) Encode(b []byte) { EncodeInodeRefs(b, *r) }

// InodeExtrefs is the payload of an INODE_EXTREF item: its packed entries.
type InodeExtrefs []InodeExtref

// Decode replaces r with the entries of the item b.
func (r *InodeExtrefs) Decode(b []byte) error {
	refs, err := ParseInodeExtrefs(b)
	*r = refs
	return err
}

// Size is the item size.
func (r *InodeExtrefs) Size() int { return InodeExtrefsSize(*r) }

// Encode packs the entries into b.
func (r *InodeExtrefs) Encode(b []byte) { EncodeInodeExtrefs(b, *r) }
