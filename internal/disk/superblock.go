package disk

import "fmt"

// Superblock geometry.
const (
	SuperblockSize          = 4096
	SuperblockOffset        = 0x10000 // primary copy, physical 64 KiB
	SuperMirrorMax          = 3       // BTRFS_SUPER_MIRROR_MAX
	SysChunkArrayMax        = 2048    // BTRFS_SYSTEM_CHUNK_ARRAY_SIZE
	NumBackupRoots          = 4
	BackupRootSize          = 168
	LabelSize               = 256
	Magic            uint64 = 0x4D5F53665248425F // "_BHRfS_M"
	MagicTemp        uint64 = 0x4D5F536652484221 // "!BHRfS_M", mkfs in progress
	// ReservedBytes is the start of every device that chunks never use.
	ReservedBytes = 1 << 20
)

// SuperblockOffsetOf returns the physical offset of superblock copy i (0..2).
func SuperblockOffsetOf(i int) PhysicalAddr {
	if i == 0 {
		return SuperblockOffset
	}
	return PhysicalAddr(16 * 1024 << (12 * uint(i)))
}

// Super flags (Superblock.Flags).
const (
	SuperFlagWritten        uint64 = 1 << 0
	SuperFlagError          uint64 = 1 << 2
	SuperFlagSeeding        uint64 = 1 << 32
	SuperFlagMetadump       uint64 = 1 << 33
	SuperFlagMetadumpV2     uint64 = 1 << 34
	SuperFlagChangingFSID   uint64 = 1 << 35
	SuperFlagChangingFSIDV2 uint64 = 1 << 36
)

// Read-only compatible feature bits (compat_ro_flags).
const (
	CompatROFreeSpaceTree      uint64 = 1 << 0
	CompatROFreeSpaceTreeValid uint64 = 1 << 1
	CompatROVerity             uint64 = 1 << 2
	CompatROBlockGroupTree     uint64 = 1 << 3
	CompatROSupported                 = CompatROFreeSpaceTree | CompatROFreeSpaceTreeValid | CompatROVerity | CompatROBlockGroupTree
)

// Incompatible feature bits (incompat_flags).
const (
	IncompatMixedBackref   uint64 = 1 << 0
	IncompatDefaultSubvol  uint64 = 1 << 1
	IncompatMixedGroups    uint64 = 1 << 2
	IncompatCompressLZO    uint64 = 1 << 3
	IncompatCompressZstd   uint64 = 1 << 4
	IncompatBigMetadata    uint64 = 1 << 5
	IncompatExtendedIref   uint64 = 1 << 6
	IncompatRAID56         uint64 = 1 << 7
	IncompatSkinnyMetadata uint64 = 1 << 8
	IncompatNoHoles        uint64 = 1 << 9
	IncompatMetadataUUID   uint64 = 1 << 10
	IncompatRAID1C34       uint64 = 1 << 11
	IncompatZoned          uint64 = 1 << 12
	IncompatExtentTreeV2   uint64 = 1 << 13
	IncompatRaidStripeTree uint64 = 1 << 14
	IncompatSimpleQuota    uint64 = 1 << 16
	IncompatRemapTree      uint64 = 1 << 17
)

// BackupRoot is struct btrfs_root_backup: the roots of one recent commit.
type BackupRoot struct {
	TreeRoot        LogicalAddr // 0
	TreeRootGen     Generation  // 8
	ChunkRoot       LogicalAddr // 16
	ChunkRootGen    Generation  // 24
	ExtentRoot      LogicalAddr // 32
	ExtentRootGen   Generation  // 40
	FSRoot          LogicalAddr // 48
	FSRootGen       Generation  // 56
	DevRoot         LogicalAddr // 64
	DevRootGen      Generation  // 72
	CsumRoot        LogicalAddr // 80
	CsumRootGen     Generation  // 88
	TotalBytes      uint64      // 96
	BytesUsed       uint64      // 104
	NumDevices      uint64      // 112
	Unused64        [4]uint64   // 120
	TreeRootLevel   uint8       // 152
	ChunkRootLevel  uint8       // 153
	ExtentRootLevel uint8       // 154
	FSRootLevel     uint8       // 155
	DevRootLevel    uint8       // 156
	CsumRootLevel   uint8       // 157
	Unused8         [10]byte    // 158
}

func (r *BackupRoot) decode(b []byte) {
	u := func(i int) uint64 { return le.Uint64(b[8*i:]) }
	r.TreeRoot, r.TreeRootGen = LogicalAddr(u(0)), Generation(u(1))
	r.ChunkRoot, r.ChunkRootGen = LogicalAddr(u(2)), Generation(u(3))
	r.ExtentRoot, r.ExtentRootGen = LogicalAddr(u(4)), Generation(u(5))
	r.FSRoot, r.FSRootGen = LogicalAddr(u(6)), Generation(u(7))
	r.DevRoot, r.DevRootGen = LogicalAddr(u(8)), Generation(u(9))
	r.CsumRoot, r.CsumRootGen = LogicalAddr(u(10)), Generation(u(11))
	r.TotalBytes, r.BytesUsed, r.NumDevices = u(12), u(13), u(14)
	for i := range r.Unused64 {
		r.Unused64[i] = u(15 + i)
	}
	r.TreeRootLevel, r.ChunkRootLevel, r.ExtentRootLevel = b[152], b[153], b[154]
	r.FSRootLevel, r.DevRootLevel, r.CsumRootLevel = b[155], b[156], b[157]
	copy(r.Unused8[:], b[158:168])
}

func (r *BackupRoot) encode(b []byte) {
	vals := []uint64{uint64(r.TreeRoot), uint64(r.TreeRootGen), uint64(r.ChunkRoot), uint64(r.ChunkRootGen),
		uint64(r.ExtentRoot), uint64(r.ExtentRootGen), uint64(r.FSRoot), uint64(r.FSRootGen),
		uint64(r.DevRoot), uint64(r.DevRootGen), uint64(r.CsumRoot), uint64(r.CsumRootGen),
		r.TotalBytes, r.BytesUsed, r.NumDevices, r.Unused64[0], r.Unused64[1], r.Unused64[2], r.Unused64[3]}
	for i, v := range vals {
		le.PutUint64(b[8*i:], v)
	}
	b[152], b[153], b[154] = r.TreeRootLevel, r.ChunkRootLevel, r.ExtentRootLevel
	b[155], b[156], b[157] = r.FSRootLevel, r.DevRootLevel, r.CsumRootLevel
	copy(b[158:168], r.Unused8[:])
}

// Superblock is struct btrfs_super_block (4096 bytes).
type Superblock struct {
	Csum                [CsumFieldSize]byte        // 0x000
	FSID                UUID                       // 0x020
	Bytenr              PhysicalAddr               // 0x030
	Flags               uint64                     // 0x038
	Magic               uint64                     // 0x040
	Generation          Generation                 // 0x048
	Root                LogicalAddr                // 0x050
	ChunkRoot           LogicalAddr                // 0x058
	LogRoot             LogicalAddr                // 0x060
	LogRootTransID      uint64                     // 0x068
	TotalBytes          uint64                     // 0x070
	BytesUsed           uint64                     // 0x078
	RootDirObjectID     ObjectID                   // 0x080
	NumDevices          uint64                     // 0x088
	SectorSize          uint32                     // 0x090
	NodeSize            uint32                     // 0x094
	LeafSize            uint32                     // 0x098
	StripeSize          uint32                     // 0x09c
	SysChunkArraySize   uint32                     // 0x0a0
	ChunkRootGeneration Generation                 // 0x0a4
	CompatFlags         uint64                     // 0x0ac
	CompatROFlags       uint64                     // 0x0b4
	IncompatFlags       uint64                     // 0x0bc
	CsumType            CsumType                   // 0x0c4
	RootLevel           uint8                      // 0x0c6
	ChunkRootLevel      uint8                      // 0x0c7
	LogRootLevel        uint8                      // 0x0c8
	DevItem             DevItem                    // 0x0c9
	Label               [LabelSize]byte            // 0x12b
	CacheGeneration     Generation                 // 0x22b
	UUIDTreeGeneration  Generation                 // 0x233
	MetadataUUID        UUID                       // 0x23b
	NrGlobalRoots       uint64                     // 0x24b
	RemapRoot           LogicalAddr                // 0x253
	RemapRootGeneration Generation                 // 0x25b
	RemapRootLevel      uint8                      // 0x263
	Reserved            [199]byte                  // 0x264
	SysChunkArray       [SysChunkArrayMax]byte     // 0x32b
	BackupRoots         [NumBackupRoots]BackupRoot // 0xb2b
	Unused              [565]byte                  // 0xdcb
}

// Decode reads a Superblock from b without validating it.
func (s *Superblock) Decode(b []byte) error {
	if len(b) < SuperblockSize {
		return shortErr("superblock", len(b), SuperblockSize)
	}
	copy(s.Csum[:], b[0:0x20])
	copy(s.FSID[:], b[0x20:0x30])
	s.Bytenr = PhysicalAddr(le.Uint64(b[0x30:]))
	s.Flags = le.Uint64(b[0x38:])
	s.Magic = le.Uint64(b[0x40:])
	s.Generation = Generation(le.Uint64(b[0x48:]))
	s.Root = LogicalAddr(le.Uint64(b[0x50:]))
	s.ChunkRoot = LogicalAddr(le.Uint64(b[0x58:]))
	s.LogRoot = LogicalAddr(le.Uint64(b[0x60:]))
	s.LogRootTransID = le.Uint64(b[0x68:])
	s.TotalBytes = le.Uint64(b[0x70:])
	s.BytesUsed = le.Uint64(b[0x78:])
	s.RootDirObjectID = ObjectID(le.Uint64(b[0x80:]))
	s.NumDevices = le.Uint64(b[0x88:])
	s.SectorSize = le.Uint32(b[0x90:])
	s.NodeSize = le.Uint32(b[0x94:])
	s.LeafSize = le.Uint32(b[0x98:])
	s.StripeSize = le.Uint32(b[0x9c:])
	s.SysChunkArraySize = le.Uint32(b[0xa0:])
	s.ChunkRootGeneration = Generation(le.Uint64(b[0xa4:]))
	s.CompatFlags = le.Uint64(b[0xac:])
	s.CompatROFlags = le.Uint64(b[0xb4:])
	s.IncompatFlags = le.Uint64(b[0xbc:])
	s.CsumType = CsumType(le.Uint16(b[0xc4:]))
	s.RootLevel, s.ChunkRootLevel, s.LogRootLevel = b[0xc6], b[0xc7], b[0xc8]
	_ = s.DevItem.Decode(b[0xc9:])
	copy(s.Label[:], b[0x12b:0x22b])
	s.CacheGeneration = Generation(le.Uint64(b[0x22b:]))
	s.UUIDTreeGeneration = Generation(le.Uint64(b[0x233:]))
	copy(s.MetadataUUID[:], b[0x23b:0x24b])
	s.NrGlobalRoots = le.Uint64(b[0x24b:])
	s.RemapRoot = LogicalAddr(le.Uint64(b[0x253:]))
	s.RemapRootGeneration = Generation(le.Uint64(b[0x25b:]))
	s.RemapRootLevel = b[0x263]
	copy(s.Reserved[:], b[0x264:0x32b])
	copy(s.SysChunkArray[:], b[0x32b:0xb2b])
	for i := range s.BackupRoots {
		s.BackupRoots[i].decode(b[0xb2b+BackupRootSize*i:])
	}
	copy(s.Unused[:], b[0xdcb:0x1000])
	return nil
}

// Encode writes s into b (4096 bytes). It does not compute the checksum; see
// CsumType.SumBlock.
func (s *Superblock) Encode(b []byte) {
	_ = b[SuperblockSize-1]
	copy(b[0:0x20], s.Csum[:])
	copy(b[0x20:0x30], s.FSID[:])
	le.PutUint64(b[0x30:], uint64(s.Bytenr))
	le.PutUint64(b[0x38:], s.Flags)
	le.PutUint64(b[0x40:], s.Magic)
	le.PutUint64(b[0x48:], uint64(s.Generation))
	le.PutUint64(b[0x50:], uint64(s.Root))
	le.PutUint64(b[0x58:], uint64(s.ChunkRoot))
	le.PutUint64(b[0x60:], uint64(s.LogRoot))
	le.PutUint64(b[0x68:], s.LogRootTransID)
	le.PutUint64(b[0x70:], s.TotalBytes)
	le.PutUint64(b[0x78:], s.BytesUsed)
	le.PutUint64(b[0x80:], uint64(s.RootDirObjectID))
	le.PutUint64(b[0x88:], s.NumDevices)
	le.PutUint32(b[0x90:], s.SectorSize)
	le.PutUint32(b[0x94:], s.NodeSize)
	le.PutUint32(b[0x98:], s.LeafSize)
	le.PutUint32(b[0x9c:], s.StripeSize)
	le.PutUint32(b[0xa0:], s.SysChunkArraySize)
	le.PutUint64(b[0xa4:], uint64(s.ChunkRootGeneration))
	le.PutUint64(b[0xac:], s.CompatFlags)
	le.PutUint64(b[0xb4:], s.CompatROFlags)
	le.PutUint64(b[0xbc:], s.IncompatFlags)
	le.PutUint16(b[0xc4:], uint16(s.CsumType))
	b[0xc6], b[0xc7], b[0xc8] = s.RootLevel, s.ChunkRootLevel, s.LogRootLevel
	s.DevItem.Encode(b[0xc9:])
	copy(b[0x12b:0x22b], s.Label[:])
	le.PutUint64(b[0x22b:], uint64(s.CacheGeneration))
	le.PutUint64(b[0x233:], uint64(s.UUIDTreeGeneration))
	copy(b[0x23b:0x24b], s.MetadataUUID[:])
	le.PutUint64(b[0x24b:], s.NrGlobalRoots)
	le.PutUint64(b[0x253:], uint64(s.RemapRoot))
	le.PutUint64(b[0x25b:], uint64(s.RemapRootGeneration))
	b[0x263] = s.RemapRootLevel
	copy(b[0x264:0x32b], s.Reserved[:])
	copy(b[0x32b:0xb2b], s.SysChunkArray[:])
	for i := range s.BackupRoots {
		s.BackupRoots[i].encode(b[0xb2b+BackupRootSize*i:])
	}
	copy(b[0xdcb:0x1000], s.Unused[:])
}

// LabelString returns the label up to its first NUL.
func (s *Superblock) LabelString() string {
	for i, c := range s.Label {
		if c == 0 {
			return string(s.Label[:i])
		}
	}
	return string(s.Label[:])
}

// MetadataFSID is the fsid that tree block headers and dev items carry:
// metadata_uuid when the METADATA_UUID feature is on, fsid otherwise.
func (s *Superblock) MetadataFSID() UUID {
	if s.IncompatFlags&IncompatMetadataUUID != 0 {
		return s.MetadataUUID
	}
	return s.FSID
}

// SysChunk is one entry of the sys_chunk_array.
type SysChunk struct {
	Key   Key
	Chunk ChunkItem
}

// SysChunks parses the sys_chunk_array.
func (s *Superblock) SysChunks() ([]SysChunk, error) {
	n := int(s.SysChunkArraySize)
	if n > SysChunkArrayMax || n < KeySize+ChunkItemSize(1) {
		return nil, Corruptf("sys_chunk_array_size %d out of range", n)
	}
	b := s.SysChunkArray[:n]
	var out []SysChunk
	for len(b) > 0 {
		var e SysChunk
		if err := e.Key.Decode(b); err != nil {
			return nil, fmt.Errorf("sys_chunk_array: %w", err)
		}
		if e.Key.Type != ChunkItemKey {
			return nil, Corruptf("sys_chunk_array: key %v is not a chunk item", e.Key)
		}
		b = b[KeySize:]
		if err := e.Chunk.Decode(b); err != nil {
			return nil, fmt.Errorf("sys_chunk_array: %w", err)
		}
		if e.Chunk.Type&BlockGroupSystem == 0 {
			return nil, Corruptf("sys_chunk_array: chunk %d is not a SYSTEM chunk", e.Key.Offset)
		}
		b = b[e.Chunk.Size():]
		out = append(out, e)
	}
	return out, nil
}

// Validate applies the kernel's superblock checks for a copy read from
// physical offset at. It does not verify the checksum (see CsumType.VerifyBlock
// on the raw bytes).
func (s *Superblock) Validate(at PhysicalAddr) error {
	bad := func(format string, args ...any) error {
		return &CorruptError{Physical: at, What: "superblock: " + fmt.Sprintf(format, args...)}
	}
	isPow2 := func(v uint32) bool { return v != 0 && v&(v-1) == 0 }
	switch {
	case s.Magic != Magic:
		return bad("bad magic 0x%x", s.Magic)
	case s.Bytenr != at:
		return bad("bytenr %d, read at %d", s.Bytenr, at)
	case !s.CsumType.Valid():
		return bad("unknown csum type %d", s.CsumType)
	case !isPow2(s.SectorSize) || s.SectorSize < 4096 || s.SectorSize > 65536:
		return bad("bad sectorsize %d", s.SectorSize)
	case !isPow2(s.NodeSize) || s.NodeSize < s.SectorSize || s.NodeSize > 65536:
		return bad("bad nodesize %d", s.NodeSize)
	case s.LeafSize != s.NodeSize:
		return bad("leafsize %d differs from nodesize %d", s.LeafSize, s.NodeSize)
	case s.RootLevel >= MaxLevel || s.ChunkRootLevel >= MaxLevel || s.LogRootLevel >= MaxLevel:
		return bad("root level out of range")
	case uint64(s.Root)%uint64(s.SectorSize) != 0 || uint64(s.ChunkRoot)%uint64(s.SectorSize) != 0 ||
		uint64(s.LogRoot)%uint64(s.SectorSize) != 0:
		return bad("root address not sector aligned")
	case s.NumDevices == 0:
		return bad("no devices")
	case s.TotalBytes == 0:
		return bad("total_bytes is zero")
	case s.DevItem.FSID != s.MetadataFSID():
		return bad("dev_item fsid %s does not match %s", s.DevItem.FSID, s.MetadataFSID())
	}
	if _, err := s.SysChunks(); err != nil {
		return &CorruptError{Physical: at, What: "superblock", Err: err}
	}
	return nil
}
