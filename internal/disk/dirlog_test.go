package disk

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzDirLogItem: any bytes decode or fail with ErrCorrupt; what decodes
// re-encodes to its first 8 bytes.
func FuzzDirLogItem(f *testing.F) {
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		var d DirLogItem
		if err := d.Decode(b); err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error does not wrap ErrCorrupt: %v", err)
			}
			return
		}
		out := make([]byte, d.Size())
		d.Encode(out)
		if !bytes.Equal(out, b[:DirLogItemSize]) {
			t.Fatalf("re-encoding differs: %x vs %x", out, b)
		}
	})
}
