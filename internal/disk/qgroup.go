package disk

import "fmt"

// Sizes of the quota-tree items.
const (
	QgroupStatusSize = 40
	// QgroupStatusLegacySize is the status item written before the
	// enable_gen field (simple quotas) existed.
	QgroupStatusLegacySize = 32
	QgroupInfoSize         = 40
	QgroupLimitSize        = 40
)

// Qgroup status flags (BTRFS_QGROUP_STATUS_FLAG_*).
const (
	QgroupStatusOn           uint64 = 1 << 0
	QgroupStatusRescan       uint64 = 1 << 1
	QgroupStatusInconsistent uint64 = 1 << 2
	QgroupStatusSimpleMode   uint64 = 1 << 3
)

// Qgroup limit flags (BTRFS_QGROUP_LIMIT_*): which limits are set.
const (
	QgroupLimitMaxRfer  uint64 = 1 << 0
	QgroupLimitMaxExcl  uint64 = 1 << 1
	QgroupLimitRsvRfer  uint64 = 1 << 2
	QgroupLimitRsvExcl  uint64 = 1 << 3
	QgroupLimitRferCmpr uint64 = 1 << 4
	QgroupLimitExclCmpr uint64 = 1 << 5
)

var qgroupStatusNames = []flagName{
	{QgroupStatusOn, "ON"}, {QgroupStatusRescan, "RESCAN"},
	{QgroupStatusInconsistent, "INCONSISTENT"}, {QgroupStatusSimpleMode, "SIMPLE_MODE"},
}

// QgroupStatusFlagsString prints status flags as "ON|RESCAN".
func QgroupStatusFlagsString(f uint64) string { return flagsString(f, qgroupStatusNames) }

// QgroupID is a qgroup id: level in the top 16 bits, the subvolume (or
// higher-level group) number in the low 48.
type QgroupID uint64

// MakeQgroupID builds the id level/id.
func MakeQgroupID(level uint16, id uint64) QgroupID {
	return QgroupID(uint64(level)<<48 | id&(1<<48-1))
}

// Level is the qgroup level (0 for subvolume qgroups).
func (q QgroupID) Level() uint16 { return uint16(q >> 48) }

// ID is the low 48 bits.
func (q QgroupID) ID() uint64 { return uint64(q) & (1<<48 - 1) }

// String prints level/id, e.g. "0/5".
func (q QgroupID) String() string { return fmt.Sprintf("%d/%d", q.Level(), q.ID()) }

// QgroupStatusItem is struct btrfs_qgroup_status_item (40 bytes; 32 in items
// written before simple quotas): key (0, QGROUP_STATUS, 0).
type QgroupStatusItem struct {
	Version    uint64     // 0x00 1
	Generation Generation // 0x08
	Flags      uint64     // 0x10 QgroupStatus*
	Rescan     uint64     // 0x18 rescan progress (next objectid)
	EnableGen  Generation // 0x20 simple quota enable transid; absent if Legacy
	// Legacy records a 32-byte item; Encode then writes 32 bytes.
	Legacy bool
}

// Size is the encoded size.
func (q *QgroupStatusItem) Size() int {
	if q.Legacy {
		return QgroupStatusLegacySize
	}
	return QgroupStatusSize
}

// Decode reads a status item: exactly 32 bytes is a legacy item, otherwise
// b must hold 40 bytes.
func (q *QgroupStatusItem) Decode(b []byte) error {
	legacy := len(b) == QgroupStatusLegacySize
	if !legacy && len(b) < QgroupStatusSize {
		return Corruptf("qgroup status item: %d bytes, need %d or %d", len(b), QgroupStatusLegacySize, QgroupStatusSize)
	}
	*q = QgroupStatusItem{
		Version:    le.Uint64(b),
		Generation: Generation(le.Uint64(b[8:])),
		Flags:      le.Uint64(b[16:]),
		Rescan:     le.Uint64(b[24:]),
		Legacy:     legacy,
	}
	if !legacy {
		q.EnableGen = Generation(le.Uint64(b[32:]))
	}
	return nil
}

// Encode writes q into b.
func (q *QgroupStatusItem) Encode(b []byte) {
	_ = b[q.Size()-1]
	le.PutUint64(b, q.Version)
	le.PutUint64(b[8:], uint64(q.Generation))
	le.PutUint64(b[16:], q.Flags)
	le.PutUint64(b[24:], q.Rescan)
	if !q.Legacy {
		le.PutUint64(b[32:], uint64(q.EnableGen))
	}
}

// QgroupInfoItem is struct btrfs_qgroup_info_item (40 bytes): key (0,
// QGROUP_INFO, qgroup id); the usage of one qgroup.
type QgroupInfoItem struct {
	Generation Generation // 0x00
	Rfer       uint64     // 0x08 referenced bytes
	RferCmpr   uint64     // 0x10 referenced bytes, compressed
	Excl       uint64     // 0x18 exclusive bytes
	ExclCmpr   uint64     // 0x20 exclusive bytes, compressed
}

// Size returns QgroupInfoSize.
func (q *QgroupInfoItem) Size() int { return QgroupInfoSize }

// Decode reads a QgroupInfoItem from b.
func (q *QgroupInfoItem) Decode(b []byte) error {
	if len(b) < QgroupInfoSize {
		return shortErr("qgroup info item", len(b), QgroupInfoSize)
	}
	q.Generation = Generation(le.Uint64(b))
	q.Rfer, q.RferCmpr = le.Uint64(b[8:]), le.Uint64(b[16:])
	q.Excl, q.ExclCmpr = le.Uint64(b[24:]), le.Uint64(b[32:])
	return nil
}

// Encode writes q into b.
func (q *QgroupInfoItem) Encode(b []byte) {
	_ = b[QgroupInfoSize-1]
	le.PutUint64(b, uint64(q.Generation))
	le.PutUint64(b[8:], q.Rfer)
	le.PutUint64(b[16:], q.RferCmpr)
	le.PutUint64(b[24:], q.Excl)
	le.PutUint64(b[32:], q.ExclCmpr)
}

// QgroupLimitItem is struct btrfs_qgroup_limit_item (40 bytes): key (0,
// QGROUP_LIMIT, qgroup id).
type QgroupLimitItem struct {
	Flags   uint64 // 0x00 QgroupLimit*: which fields below apply
	MaxRfer uint64 // 0x08
	MaxExcl uint64 // 0x10
	RsvRfer uint64 // 0x18
	RsvExcl uint64 // 0x20
}

// Size returns QgroupLimitSize.
func (q *QgroupLimitItem) Size() int { return QgroupLimitSize }

// Decode reads a QgroupLimitItem from b.
func (q *QgroupLimitItem) Decode(b []byte) error {
	if len(b) < QgroupLimitSize {
		return shortErr("qgroup limit item", len(b), QgroupLimitSize)
	}
	q.Flags = le.Uint64(b)
	q.MaxRfer, q.MaxExcl = le.Uint64(b[8:]), le.Uint64(b[16:])
	q.RsvRfer, q.RsvExcl = le.Uint64(b[24:]), le.Uint64(b[32:])
	return nil
}

// Encode writes q into b.
func (q *QgroupLimitItem) Encode(b []byte) {
	_ = b[QgroupLimitSize-1]
	le.PutUint64(b, q.Flags)
	le.PutUint64(b[8:], q.MaxRfer)
	le.PutUint64(b[16:], q.MaxExcl)
	le.PutUint64(b[24:], q.RsvRfer)
	le.PutUint64(b[32:], q.RsvExcl)
}
