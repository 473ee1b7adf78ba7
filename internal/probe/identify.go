package probe

import (
	"bytes"
	"encoding/binary"
	"io"
)

// Found is what Identify recognised.
type Found struct {
	// Type is a short name: "btrfs", "ext4", "xfs", "vfat", "ntfs",
	// "swap", "crypto_LUKS", "iso9660", "squashfs", "gpt", "dos" (an MBR
	// partition table), "qcow2", "gzip", "zstd", "xz", "bzip2", "tar".
	Type string
	// What says it in words for messages: "ext4 filesystem".
	What string
	// Filesystem is true for filesystems and swap, whose data a new
	// filesystem written over them would destroy.
	Filesystem bool
}

// Identify reads the start of r and returns what it holds, or ok false
// when it recognises nothing. size is r's size in bytes (-1 if unknown).
// The btrfs check comes first: a btrfs image that is damaged elsewhere
// is still btrfs.
func Identify(r io.ReaderAt, size int64) (Found, bool) {
	for _, p := range probes {
		if f, ok := p(r, size); ok {
			return f, true
		}
	}
	return Found{}, false
}

// Zero reports whether the first n bytes of r (fewer if r is shorter)
// are all zero: a fresh file or a wiped device, no filesystem at all.
func Zero(r io.ReaderAt, n int64) bool {
	buf := make([]byte, 64<<10)
	for off := int64(0); off < n; off += int64(len(buf)) {
		m, err := r.ReadAt(buf[:min(int64(len(buf)), n-off)], off)
		for _, c := range buf[:m] {
			if c != 0 {
				return false
			}
		}
		if err != nil {
			break
		}
	}
	return true
}

var probes = []func(io.ReaderAt, int64) (Found, bool){
	btrfs, luks, xfs, ext, squashfs, iso9660, swap, gpt, fat, ntfs, mbr, containers,
}

// at reads n bytes at off; nil when r is shorter.
func at(r io.ReaderAt, off int64, n int) []byte {
	b := make([]byte, n)
	if m, _ := r.ReadAt(b, off); m < n {
		return nil
	}
	return b
}

func has(r io.ReaderAt, off int64, magic string) bool {
	b := at(r, off, len(magic))
	return b != nil && string(b) == magic
}

func fsFound(typ, what string) (Found, bool) {
	return Found{Type: typ, What: what, Filesystem: true}, true
}

// BtrfsMirror reports whether a btrfs superblock copy (at 64 MiB or 256
// GiB) carries the magic: a btrfs filesystem whose primary superblock is
// wiped or damaged still has them.
func BtrfsMirror(r io.ReaderAt) bool {
	return has(r, 64<<20+0x40, "_BHRfS_M") || has(r, 256<<30+0x40, "_BHRfS_M")
}

// btrfs: "_BHRfS_M" at byte 64 of the superblock at 64 KiB.
func btrfs(r io.ReaderAt, _ int64) (Found, bool) {
	if has(r, 0x10040, "_BHRfS_M") {
		return fsFound("btrfs", "btrfs filesystem")
	}
	return Found{}, false
}

// LUKS 1 and 2: "LUKS\xba\xbe" at 0.
func luks(r io.ReaderAt, _ int64) (Found, bool) {
	if has(r, 0, "LUKS\xba\xbe") {
		return fsFound("crypto_LUKS", "LUKS encrypted volume")
	}
	return Found{}, false
}

// XFS: "XFSB" at 0.
func xfs(r io.ReaderAt, _ int64) (Found, bool) {
	if has(r, 0, "XFSB") {
		return fsFound("xfs", "xfs filesystem")
	}
	return Found{}, false
}

// ext2/3/4: the superblock at 1024 has s_magic 0xEF53 at byte 56. Which
// one it is follows from the features, as blkid decides: features ext3
// does not know make it ext4, a journal makes it ext3.
func ext(r io.ReaderAt, _ int64) (Found, bool) {
	sb := at(r, 1024, 0x68)
	if sb == nil || binary.LittleEndian.Uint16(sb[0x38:]) != 0xEF53 {
		return Found{}, false
	}
	compat := binary.LittleEndian.Uint32(sb[0x5C:])
	incompat := binary.LittleEndian.Uint32(sb[0x60:])
	roCompat := binary.LittleEndian.Uint32(sb[0x64:])
	const (
		hasJournal     = 0x0004
		ext3Incompat   = 0x0002 | 0x0004 | 0x0010 // filetype, recover, meta_bg
		ext3RoCompat   = 0x0001 | 0x0002 | 0x0004 // sparse_super, large_file, btree_dir
		journalDevFlag = 0x0008
	)
	switch {
	case incompat&journalDevFlag != 0:
		return fsFound("jbd", "ext journal device")
	case incompat&^ext3Incompat != 0 || roCompat&^ext3RoCompat != 0:
		return fsFound("ext4", "ext4 filesystem")
	case compat&hasJournal != 0:
		return fsFound("ext3", "ext3 filesystem")
	}
	return fsFound("ext2", "ext2 filesystem")
}

// squashfs: "hsqs" (little-endian 0x73717368) at 0.
func squashfs(r io.ReaderAt, _ int64) (Found, bool) {
	if has(r, 0, "hsqs") || has(r, 0, "sqsh") {
		return fsFound("squashfs", "squashfs filesystem")
	}
	return Found{}, false
}

// ISO 9660: a volume descriptor "\x01CD001" at sector 16 (2048-byte
// sectors); UDF marks its volume recognition sequence with BEA01.
func iso9660(r io.ReaderAt, _ int64) (Found, bool) {
	if has(r, 0x8001, "CD001") {
		return fsFound("iso9660", "iso9660 filesystem (CD/DVD image)")
	}
	if has(r, 0x8001, "BEA01") {
		return fsFound("udf", "UDF filesystem")
	}
	return Found{}, false
}

// Linux swap: "SWAPSPACE2" (or the old "SWAP-SPACE") in the last 10
// bytes of the first page, whatever the page size.
func swap(r io.ReaderAt, _ int64) (Found, bool) {
	for _, page := range []int64{4096, 8192, 16384, 65536} {
		if has(r, page-10, "SWAPSPACE2") || has(r, page-10, "SWAP-SPACE") {
			return fsFound("swap", "swap space")
		}
	}
	return Found{}, false
}

// GPT: "EFI PART" in the header at LBA 1, for 512- or 4096-byte sectors.
func gpt(r io.ReaderAt, _ int64) (Found, bool) {
	if has(r, 512, "EFI PART") || has(r, 4096, "EFI PART") {
		return Found{Type: "gpt", What: "disk with a GPT partition table (name a partition)"}, true
	}
	return Found{}, false
}

// bootSig reports the 0x55AA signature at the end of the first sector,
// shared by FAT and NTFS boot sectors and MBR partition tables.
func bootSig(r io.ReaderAt) bool { return has(r, 510, "\x55\xaa") }

// FAT: a boot sector whose BIOS parameter block names the FAT type at
// byte 54 (FAT12/16) or 82 (FAT32).
func fat(r io.ReaderAt, _ int64) (Found, bool) {
	if !bootSig(r) {
		return Found{}, false
	}
	if has(r, 54, "FAT1") || has(r, 82, "FAT32") || has(r, 54, "FAT ") {
		return fsFound("vfat", "vfat (FAT) filesystem")
	}
	return Found{}, false
}

// NTFS: "NTFS    " as the OEM name at byte 3.
func ntfs(r io.ReaderAt, _ int64) (Found, bool) {
	if has(r, 3, "NTFS    ") {
		return fsFound("ntfs", "NTFS filesystem")
	}
	return Found{}, false
}

// MBR: the boot signature and at least one partition entry with a type
// (after FAT and NTFS, whose boot sectors carry the signature too).
func mbr(r io.ReaderAt, _ int64) (Found, bool) {
	if !bootSig(r) {
		return Found{}, false
	}
	table := at(r, 446, 64)
	for i := 0; i < 4; i++ {
		e := table[i*16 : (i+1)*16]
		if (e[0] == 0 || e[0] == 0x80) && e[4] != 0 {
			return Found{Type: "dos", What: "disk with an MBR partition table (name a partition)"}, true
		}
	}
	return Found{}, false
}

// containers: a compressed or packed image that needs unpacking first.
func containers(r io.ReaderAt, _ int64) (Found, bool) {
	head := at(r, 0, 6)
	for _, c := range []struct{ magic, typ, what string }{
		{"QFI\xfb", "qcow2", "qcow2 disk image (convert it to raw first)"},
		{"\x1f\x8b", "gzip", "gzip-compressed data (decompress it first)"},
		{"\x28\xb5\x2f\xfd", "zstd", "zstd-compressed data (decompress it first)"},
		{"\xfd7zXZ\x00", "xz", "xz-compressed data (decompress it first)"},
		{"BZh", "bzip2", "bzip2-compressed data (decompress it first)"},
	} {
		if head != nil && bytes.HasPrefix(head, []byte(c.magic)) {
			return Found{Type: c.typ, What: c.what}, true
		}
	}
	if has(r, 257, "ustar") {
		return Found{Type: "tar", What: "tar archive (gobtrfs mkfs --tar makes an image of it)"}, true
	}
	return Found{}, false
}
