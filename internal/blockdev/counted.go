package blockdev

import "sync/atomic"

// Counted is a Device that adds the bytes of every successful write to a
// counter, so a writer can report how much it wrote to its devices (its
// write amplification) without each device type counting. Many Counted
// devices may share one counter.
type Counted struct {
	Device
	written *atomic.Int64
	shares  *ShareCounts // nil: WriteShared is not counted apart
}

// ShareCounts count what WriteShared did through Counted devices.
type ShareCounts struct {
	// Shared is the bytes stored by sharing a host file's blocks; they
	// are not counted as written.
	Shared atomic.Int64
	// Refused is the bytes offered for sharing that the device wrote
	// instead (counted as written too).
	Refused atomic.Int64
}

// NewCounted wraps dev; written receives the bytes written through it.
func NewCounted(dev Device, written *atomic.Int64) *Counted {
	return &Counted{Device: dev, written: written}
}

// NewCountedShared is NewCounted that also counts, in shares, the bytes
// WriteShared stored by sharing and those it had to write.
func NewCountedShared(dev Device, written *atomic.Int64, shares *ShareCounts) *Counted {
	return &Counted{Device: dev, written: written, shares: shares}
}

// WriteShared implements SharedWriter.
func (c *Counted) WriteShared(p []byte, off int64, src HostRange) (bool, error) {
	shared, err := WriteShared(c.Device, p, off, src)
	n := int64(len(p))
	switch {
	case shared:
		if c.shares != nil {
			c.shares.Shared.Add(n)
		}
	case err == nil:
		c.written.Add(n)
		if c.shares != nil {
			c.shares.Refused.Add(n)
		}
	}
	return shared, err
}

// WriteAt implements Device: it counts what the wrapped device wrote,
// also when the write failed part way.
func (c *Counted) WriteAt(p []byte, off int64) (int, error) {
	n, err := c.Device.WriteAt(p, off)
	c.written.Add(int64(n))
	return n, err
}
