package mkfs

import (
	"fmt"
	"io"
)

// sharedBatch is how much of a file writeShared reads, checksums and
// shares per change. A multiple of every sector size, so that every
// batch but a segment's last starts and ends on a sector boundary.
const sharedBatch = 8 << 20

// writeShared writes the segments of a new file whose data come from an
// open host file, sharing their whole sectors with it
// (btrfs.FS.PrepareShared) where the host allows, and returns where the
// last segment ends. The bytes are read all the same: the checksums
// come from them.
func (f *filler) writeShared(e *Entry) (int64, error) {
	p := e.Path
	var buf []byte
	var end int64
	for _, s := range e.Segments {
		for off := s.Off; off < s.Off+s.Len; {
			want := min(s.Off+s.Len-off, sharedBatch)
			if int64(cap(buf)) < want {
				buf = make([]byte, want)
			}
			b := buf[:want]
			n, err := e.host.ReadAt(b, off)
			if err != nil && err != io.EOF {
				return 0, fmt.Errorf("%q: %w", p, err)
			}
			if int64(n) != want {
				return 0, fmt.Errorf("%q: data ended at offset %d, expected %d bytes more (file changed while read?)", p, off+int64(n), s.Off+s.Len-off-int64(n))
			}
			pd, err := f.fsys.PrepareShared(b, e.host, off)
			if err != nil {
				return 0, fmt.Errorf("%q: %w", p, err)
			}
			// WritePrepared keeps no reference to b: the buffer is
			// read into again for the next batch.
			if _, err := f.fsys.WritePrepared(p, pd, off); err != nil {
				return 0, err
			}
			off += want
			if err := f.maybeCommit(0, want); err != nil {
				return 0, err
			}
		}
		end = s.Off + s.Len
	}
	return end, nil
}
