package txn

import (
	"fmt"
	"strings"

	"github.com/gobtrfs/btrfs/internal/disk"
)

// SetLabel asks Commit to write label into the superblocks, as the
// kernel's BTRFS_IOC_SET_FSLABEL does at its commit. The label is at most
// disk.LabelSize-1 bytes (the field keeps a NUL) without NUL bytes, as
// the kernel requires; the last call wins.
func (t *Txn) SetLabel(label string) error {
	if len(label) >= disk.LabelSize {
		return fmt.Errorf("label is %d bytes, at most %d", len(label), disk.LabelSize-1)
	}
	if strings.IndexByte(label, 0) >= 0 {
		return fmt.Errorf("label holds a NUL byte")
	}
	var b [disk.LabelSize]byte
	copy(b[:], label)
	t.mu.Lock()
	t.label = &b
	t.mu.Unlock()
	return nil
}
