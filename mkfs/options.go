package mkfs

import (
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/disk"
)

// Options choose what Format creates. The zero value is mkfs.btrfs
// 6.19's default on one device: 16 KiB nodes, 4 KiB sectors, crc32c, DUP
// metadata, SINGLE data, features extref, skinny-metadata, no-holes,
// free-space-tree and block-group-tree (6.2's, less the block-group tree,
// with Features "^block-group-tree").
type Options struct {
	// Size is the filesystem size in bytes; 0 takes the device's size.
	// It is rounded down to the sector size.
	Size int64
	// Label is stored in the superblock (at most 255 bytes).
	Label string
	// UUID is the filesystem id; zero picks one (randomly, or from Seed
	// when Reproducible).
	UUID btrfs.UUID
	// DeviceUUID is the device's id (mkfs.btrfs --device-uuid); zero
	// picks one as for UUID.
	DeviceUUID btrfs.UUID
	// NodeSize is the tree block size; 0 means 16384 (or the sector size
	// when that is larger).
	NodeSize int
	// SectorSize is the data block size; 0 means 4096.
	SectorSize int
	// Csum is the checksum algorithm; the zero value is crc32c.
	Csum btrfs.CsumType
	// MetadataProfile and DataProfile are "single" or "dup"; "" means
	// mkfs.btrfs 6.2's defaults, "dup" for metadata and "single" for
	// data. SYSTEM chunks take the metadata profile, as in progs.
	MetadataProfile, DataProfile string
	// Features are mkfs.btrfs -O names, applied in order on top of the
	// defaults; a leading "^" turns a feature off. Unknown or unsupported
	// names are an error.
	Features []string
	// Time is stamped on every inode and root item; zero means now. It is
	// truncated to whole seconds as progs does.
	Time time.Time
	// Reproducible derives every UUID that is not given from Seed with a
	// hash, so that equal options give byte-identical images.
	Reproducible bool
	// Seed feeds the UUID derivation when Reproducible is set.
	Seed []byte
}

// Default geometry and features, as mkfs.btrfs 6.2 picks them.
const (
	DefaultNodeSize   = 16384
	DefaultSectorSize = 4096
)

// ErrUnsupported is wrapped by errors for options this package cannot
// create (unknown feature names, profiles other than single and dup); it
// matches btrfs.ErrUnsupported too.
var ErrUnsupported error = optionError{}

type optionError struct{}

func (optionError) Error() string { return "mkfs: unsupported option" }
func (optionError) Unwrap() error { return btrfs.ErrUnsupported }

// features is the resolved feature set.
type features struct {
	extref, skinny, noHoles, fst bool
	// bgt keeps the BLOCK_GROUP_ITEMs in the block-group tree (11).
	bgt bool
	// mixed puts data and metadata in one DATA|METADATA chunk.
	mixed bool
}

func (f features) incompat() uint64 {
	v := disk.IncompatMixedBackref
	if f.extref {
		v |= disk.IncompatExtendedIref
	}
	if f.skinny {
		v |= disk.IncompatSkinnyMetadata
	}
	if f.noHoles {
		v |= disk.IncompatNoHoles
	}
	if f.mixed {
		v |= disk.IncompatMixedGroups
	}
	return v
}

func (f features) compatRO() uint64 {
	var v uint64
	if f.fst {
		v |= disk.CompatROFreeSpaceTree | disk.CompatROFreeSpaceTreeValid
	}
	if f.bgt {
		v |= disk.CompatROBlockGroupTree
	}
	return v
}

// config is Options with every default filled in and checked.
type config struct {
	size                 uint64
	label                string
	nodeSize, sectorSize int
	csum                 disk.CsumType
	metaDUP, dataDUP     bool
	feat                 features
	now                  disk.Timespec
	fsid, devUUID        disk.UUID
	chunkUUID, fsUUID    disk.UUID
}

// resolve checks opts against a device of devSize bytes and fills in the
// defaults.
func resolve(opts Options, devSize int64) (*config, error) {
	c := &config{label: opts.Label, csum: disk.CsumType(opts.Csum)}
	if !c.csum.Valid() {
		return nil, fmt.Errorf("%w: checksum type %d", ErrUnsupported, opts.Csum)
	}
	if len(opts.Label) >= disk.LabelSize {
		return nil, fmt.Errorf("mkfs: label of %d bytes, at most %d", len(opts.Label), disk.LabelSize-1)
	}
	c.sectorSize = opts.SectorSize
	if c.sectorSize == 0 {
		c.sectorSize = DefaultSectorSize
	}
	if !pow2(c.sectorSize) || c.sectorSize < 4096 || c.sectorSize > 65536 {
		return nil, fmt.Errorf("%w: sector size %d", ErrUnsupported, c.sectorSize)
	}
	var err error
	if c.feat, _, err = parseFeatures(opts.Features); err != nil {
		return nil, err
	}
	c.nodeSize = opts.NodeSize
	if c.nodeSize == 0 {
		c.nodeSize = max(DefaultNodeSize, c.sectorSize)
		if c.feat.mixed {
			c.nodeSize = c.sectorSize // data and tree blocks share groups: one size
		}
	}
	if !pow2(c.nodeSize) || c.nodeSize < c.sectorSize || c.nodeSize > 65536 {
		return nil, fmt.Errorf("%w: node size %d with sector size %d", ErrUnsupported, c.nodeSize, c.sectorSize)
	}
	if c.feat.mixed && c.nodeSize != c.sectorSize {
		return nil, fmt.Errorf("%w: node size %d with mixed block groups (must equal the sector size %d)",
			ErrUnsupported, c.nodeSize, c.sectorSize)
	}
	// Mixed groups default to SINGLE for both, as in progs.
	if c.metaDUP, err = profile(opts.MetadataProfile, !c.feat.mixed); err != nil {
		return nil, err
	}
	if c.dataDUP, err = profile(opts.DataProfile, false); err != nil {
		return nil, err
	}
	if c.feat.mixed && (c.metaDUP || c.dataDUP) {
		return nil, fmt.Errorf("%w: mixed block groups with DUP (only single)", ErrUnsupported)
	}
	size := opts.Size
	if size == 0 {
		size = devSize
	}
	if size <= 0 {
		return nil, errors.New("mkfs: size is 0 and the device has no size")
	}
	if size > devSize {
		return nil, fmt.Errorf("mkfs: size %d larger than the device (%d bytes)", size, devSize)
	}
	c.size = uint64(size) &^ uint64(c.sectorSize-1)
	tm := opts.Time
	if tm.IsZero() {
		tm = time.Now()
	}
	c.now = disk.Timespec{Sec: tm.Unix()}
	c.setUUIDs(opts)
	return c, nil
}

func pow2(n int) bool { return n > 0 && n&(n-1) == 0 }

// profile parses a profile name; def is the value of "".
func profile(name string, def bool) (dup bool, err error) {
	switch strings.ToLower(name) {
	case "":
		return def, nil
	case "single":
		return false, nil
	case "dup":
		return true, nil
	}
	return false, fmt.Errorf("%w: profile %q (only single and dup)", ErrUnsupported, name)
}

// setUUIDs picks the four identifiers: given, derived from the seed, or
// random. The device uuid, chunk tree uuid and fs tree uuid are derived
// from the seed too, each under its own name, so they all differ.
func (c *config) setUUIDs(opts Options) {
	pick := func(name string) disk.UUID {
		var u disk.UUID
		if opts.Reproducible {
			h := sha256.New()
			h.Write([]byte("gobtrfs mkfs\x00" + name + "\x00"))
			h.Write(opts.Seed)
			copy(u[:], h.Sum(nil))
		} else {
			rand.Read(u[:])
		}
		u[6] = u[6]&0x0f | 0x40 // version 4
		u[8] = u[8]&0x3f | 0x80 // RFC 4122 variant
		return u
	}
	c.fsid = disk.UUID(opts.UUID)
	if c.fsid.IsZero() {
		c.fsid = pick("fsid")
	}
	c.devUUID = disk.UUID(opts.DeviceUUID)
	if c.devUUID.IsZero() {
		c.devUUID = pick("device")
	}
	c.chunkUUID = pick("chunk tree")
	c.fsUUID = pick("fs tree")
}
