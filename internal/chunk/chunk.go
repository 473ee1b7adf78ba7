package chunk

import (
	"fmt"
	"math"

	"github.com/gobtrfs/btrfs/internal/disk"
)

// stripeLen is BTRFS_STRIPE_LEN, the size of one stripe element.
const stripeLen = disk.StripeLen

// Chunk is a validated CHUNK_ITEM at its logical address. It is immutable:
// a Map hands out the same *Chunk to many readers.
type Chunk struct {
	logical    disk.LogicalAddr
	item       disk.ChunkItem // own copy, Stripes included
	profile    Profile
	data       int    // data stripes per row (see DataStripes)
	stripeSize uint64 // bytes of each stripe on its device
}

// New validates a chunk item found at logical address logical (the key
// offset) and returns it as a Chunk. sectorSize is the filesystem's sector
// size (0 skips the alignment checks). Every error wraps disk.ErrCorrupt.
// The item is copied; the caller may reuse it.
func New(logical disk.LogicalAddr, it *disk.ChunkItem, sectorSize uint32) (*Chunk, error) {
	if err := it.Validate(logical, sectorSize); err != nil {
		return nil, err
	}
	if int(it.NumStripes) != len(it.Stripes) {
		return nil, corrupt(logical, "num_stripes %d but %d stripes", it.NumStripes, len(it.Stripes))
	}
	if it.Length > math.MaxInt64 || uint64(logical) > math.MaxInt64-it.Length {
		return nil, corrupt(logical, "length %d runs past 2^63", it.Length)
	}
	prof, _ := ProfileOf(it.Type) // Validate rejected several profile bits
	c := &Chunk{logical: logical, item: *it, profile: prof}
	c.item.Stripes = append([]disk.Stripe(nil), it.Stripes...)
	n := len(it.Stripes)
	switch {
	case prof.Mirrored():
		c.data = 1
	case prof == RAID10:
		c.data = n / int(it.SubStripes)
	default:
		c.data = n - prof.Parity()
	}
	c.stripeSize = it.Length / uint64(c.data)
	for k, s := range it.Stripes {
		if uint64(s.Offset) > math.MaxInt64-it.Length {
			return nil, corrupt(logical, "stripe %d at device offset %d runs past 2^63", k, s.Offset)
		}
	}
	return c, nil
}

// corrupt builds the error for a bad chunk item.
func corrupt(logical disk.LogicalAddr, format string, args ...any) error {
	return &disk.CorruptError{What: fmt.Sprintf("chunk %d: ", logical) + fmt.Sprintf(format, args...)}
}

// Logical is the first logical address of the chunk.
func (c *Chunk) Logical() disk.LogicalAddr { return c.logical }

// Length is the number of logical bytes the chunk maps.
func (c *Chunk) Length() uint64 { return c.item.Length }

// End is the first logical address after the chunk.
func (c *Chunk) End() disk.LogicalAddr { return c.logical + disk.LogicalAddr(c.item.Length) }

// Contains reports whether the chunk maps logical address l.
func (c *Chunk) Contains(l disk.LogicalAddr) bool { return l >= c.logical && l < c.End() }

// Item returns a copy of the chunk item.
func (c *Chunk) Item() disk.ChunkItem {
	it := c.item
	it.Stripes = append([]disk.Stripe(nil), c.item.Stripes...)
	return it
}

// Type returns the block group flags (type and profile bits).
func (c *Chunk) Type() uint64 { return c.item.Type }

// Profile returns the replication profile.
func (c *Chunk) Profile() Profile { return c.profile }

// NumStripes is the number of device stripes.
func (c *Chunk) NumStripes() int { return len(c.item.Stripes) }

// Stripe returns stripe k (0 <= k < NumStripes).
func (c *Chunk) Stripe(k int) disk.Stripe { return c.item.Stripes[k] }

// DataStripes is the number of stripes whose capacity holds distinct data:
// 1 for mirrored profiles, n for RAID0, n/sub for RAID10, n-1 for RAID5 and
// n-2 for RAID6.
func (c *Chunk) DataStripes() int { return c.data }

// StripeSize is the number of bytes each stripe occupies on its device: the
// length of each of the chunk's DEV_EXTENTs.
func (c *Chunk) StripeSize() uint64 { return c.stripeSize }

// String describes the chunk briefly, for errors and logs.
func (c *Chunk) String() string {
	return fmt.Sprintf("chunk %d+%d %s", c.logical, c.item.Length, disk.BlockGroupFlagsString(c.item.Type))
}
