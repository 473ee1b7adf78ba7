package disk

import "fmt"

// DirItemBaseSize is the size of struct btrfs_dir_item without name and data.
const DirItemBaseSize = 30

// FileType is the type byte of a directory entry (BTRFS_FT_*). Its values
// differ from the S_IFMT bits; see FileTypeOfMode and FileType.Mode.
type FileType uint8

// Directory entry types.
const (
	FtUnknown  FileType = 0
	FtRegular  FileType = 1
	FtDir      FileType = 2
	FtCharDev  FileType = 3
	FtBlockDev FileType = 4
	FtFIFO     FileType = 5
	FtSocket   FileType = 6
	FtSymlink  FileType = 7
	FtXattr    FileType = 8 // XATTR_ITEM entries only
	FtMax      FileType = 9 // first invalid type
	// FtEncrypted is a flag bit set on entries of encrypted directories.
	FtEncrypted FileType = 0x80
)

var fileTypeNames = [...]string{"UNKNOWN", "FILE", "DIR", "CHRDEV", "BLKDEV", "FIFO", "SOCK", "SYMLINK", "XATTR"}

// String prints the name dump-tree uses (FILE, DIR, SYMLINK, XATTR, ...).
func (t FileType) String() string {
	base := t &^ FtEncrypted
	s := fmt.Sprintf("UNKNOWN.%d", uint8(base))
	if base < FtMax {
		s = fileTypeNames[base]
	}
	if t&FtEncrypted != 0 {
		s += "|ENCRYPTED"
	}
	return s
}

// Base returns the type without the encryption flag.
func (t FileType) Base() FileType { return t &^ FtEncrypted }

// Mode returns the S_IFMT bits for the type (0 for XATTR and unknown types).
func (t FileType) Mode() uint32 {
	switch t.Base() {
	case FtRegular:
		return ModeRegular
	case FtDir:
		return ModeDir
	case FtCharDev:
		return ModeCharDev
	case FtBlockDev:
		return ModeBlockDev
	case FtFIFO:
		return ModeFIFO
	case FtSocket:
		return ModeSocket
	case FtSymlink:
		return ModeSymlink
	}
	return 0
}

// DirItem is one entry of a DIR_ITEM, DIR_INDEX or XATTR_ITEM item, struct
// btrfs_dir_item (30 bytes + name + data). DIR_ITEM and XATTR_ITEM keys are
// (dir or inode, type, NameHash(name)) and pack every entry whose name
// hashes alike; a DIR_INDEX item holds exactly one entry.
type DirItem struct {
	Location Key        // 0x00 (ino, INODE_ITEM, 0), (subvol, ROOT_ITEM, x), or zero for xattrs
	TransID  Generation // 0x11
	// 0x19 data_len u16, 0x1b name_len u16 come from len(Data), len(Name).
	Type FileType // 0x1d
	Name []byte   // 0x1e
	Data []byte   // after the name: the xattr value; empty for directory entries
}

// Size is the encoded size of the entry.
func (d *DirItem) Size() int { return DirItemBaseSize + len(d.Name) + len(d.Data) }

// String prints the entry in the form dump-tree uses, on one line.
func (d *DirItem) String() string {
	return fmt.Sprintf("location key %v type %v transid %d data_len %d name_len %d name: %s",
		d.Location, d.Type, d.TransID, len(d.Data), len(d.Name), d.Name)
}

// ParseDirItems decodes every entry of a DIR_ITEM, DIR_INDEX or XATTR_ITEM
// item. The entries must tile the item exactly. Names and data are copies.
func ParseDirItems(b []byte) ([]DirItem, error) {
	buf := cloneTight(b)
	var items []DirItem
	for off := 0; off < len(buf); {
		if len(buf)-off < DirItemBaseSize {
			return nil, Corruptf("dir item at byte %d: %d bytes left, need %d", off, len(buf)-off, DirItemBaseSize)
		}
		p := buf[off:]
		dataLen := int(le.Uint16(p[0x19:]))
		nameLen := int(le.Uint16(p[0x1b:]))
		end := off + DirItemBaseSize + nameLen + dataLen
		if end > len(buf) {
			return nil, Corruptf("dir item at byte %d: name %d + data %d bytes overrun item of %d", off, nameLen, dataLen, len(buf))
		}
		nameEnd := off + DirItemBaseSize + nameLen
		d := DirItem{
			Location: KeyAt(p),
			TransID:  Generation(le.Uint64(p[0x11:])),
			Type:     FileType(p[0x1d]),
			Name:     buf[off+DirItemBaseSize : nameEnd : nameEnd],
		}
		if dataLen > 0 {
			d.Data = buf[nameEnd:end:end]
		}
		items = append(items, d)
		off = end
	}
	return items, nil
}

// DirItemsSize is the item size holding items.
func DirItemsSize(items []DirItem) int {
	n := 0
	for i := range items {
		n += items[i].Size()
	}
	return n
}

// EncodeDirItems packs items into b, which must hold DirItemsSize(items) bytes.
func EncodeDirItems(b []byte, items []DirItem) {
	off := 0
	for i := range items {
		d := &items[i]
		p := b[off : off+d.Size()]
		d.Location.Encode(p)
		le.PutUint64(p[0x11:], uint64(d.TransID))
		le.PutUint16(p[0x19:], nameLen16(d.Data))
		le.PutUint16(p[0x1b:], nameLen16(d.Name))
		p[0x1d] = byte(d.Type)
		copy(p[DirItemBaseSize:], d.Name)
		copy(p[DirItemBaseSize+len(d.Name):], d.Data)
		off += len(p)
	}
}

// DirItems is the payload of a DIR_ITEM, DIR_INDEX or XATTR_ITEM item.
type DirItems []DirItem

// Decode replaces d with the entries of the item b.
func (d *DirItems) Decode(b []byte) error {
	items, err := ParseDirItems(b)
	*d = items
	return err
}

// Size is the item size.
func (d *DirItems) Size() int { return DirItemsSize(*d) }

// Encode packs the entries into b.
func (d *DirItems) Encode(b []byte) { EncodeDirItems(b, *d) }
