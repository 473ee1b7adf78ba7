package disk

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"time"
)

var le = binary.LittleEndian

// LogicalAddr is a byte address in the filesystem's logical (chunk-mapped)
// address space. Tree pointers and extent addresses are logical.
type LogicalAddr uint64

// PhysicalAddr is a byte offset on one device.
type PhysicalAddr uint64

// ObjectID is the objectid of a key: an inode number, a tree id, or one of
// the well-known ids.
type ObjectID uint64

// Generation is a transaction id.
type Generation uint64

// DevID identifies a device within a filesystem (1-based).
type DevID uint64

// UUID is a 16-byte identifier stored raw.
type UUID [16]byte

// String prints the UUID in the usual 8-4-4-4-12 form, in byte order.
func (u UUID) String() string {
	var b [36]byte
	hex.Encode(b[0:8], u[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], u[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], u[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], u[8:10])
	b[23] = '-'
	hex.Encode(b[24:], u[10:])
	return string(b[:])
}

// IsZero reports whether every byte is zero.
func (u UUID) IsZero() bool { return u == UUID{} }

// ParseUUID parses the 8-4-4-4-12 form.
func ParseUUID(s string) (UUID, error) {
	var u UUID
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return u, fmt.Errorf("invalid uuid %q", s)
	}
	h := s[0:8] + s[9:13] + s[14:18] + s[19:23] + s[24:]
	if _, err := hex.Decode(u[:], []byte(h)); err != nil {
		return u, fmt.Errorf("invalid uuid %q: %w", s, err)
	}
	return u, nil
}

// TimespecSize is the size of struct btrfs_timespec.
const TimespecSize = 12

// Timespec is struct btrfs_timespec: seconds since the epoch and nanoseconds.
type Timespec struct {
	Sec  int64  // 0x00
	Nsec uint32 // 0x08
}

// Decode reads a Timespec from b.
func (t *Timespec) Decode(b []byte) error {
	if len(b) < TimespecSize {
		return shortErr("timespec", len(b), TimespecSize)
	}
	t.Sec = int64(le.Uint64(b))
	t.Nsec = le.Uint32(b[8:])
	return nil
}

// Encode writes t into b.
func (t Timespec) Encode(b []byte) {
	_ = b[TimespecSize-1]
	le.PutUint64(b, uint64(t.Sec))
	le.PutUint32(b[8:], t.Nsec)
}

// Time converts to a time.Time in UTC.
func (t Timespec) Time() time.Time { return time.Unix(t.Sec, int64(t.Nsec)).UTC() }

// TimespecOf converts a time.Time.
func TimespecOf(tm time.Time) Timespec {
	return Timespec{Sec: tm.Unix(), Nsec: uint32(tm.Nanosecond())}
}
