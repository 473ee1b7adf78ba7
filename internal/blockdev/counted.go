package blockdev

import "sync/atomic"

// Counted is a Device that adds the bytes of every successful write to a
// counter, so a writer can report how much it wrote to its devices (its
// write amplification) without each device type counting. Many Counted
// devices may share one counter.
type Counted struct {
	Device
	written *atomic.Int64
}

// NewCounted wraps dev; written receives the bytes written through it.
func NewCounted(dev Device, written *atomic.Int64) *Counted {
	return &Counted{Device: dev, written: written}
}

// WriteAt implements Device: it counts what the wrapped device wrote,
// also when the write failed part way.
func (c *Counted) WriteAt(p []byte, off int64) (int, error) {
	n, err := c.Device.WriteAt(p, off)
	c.written.Add(int64(n))
	return n, err
}
