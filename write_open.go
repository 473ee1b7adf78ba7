package btrfs

import (
	"fmt"

	"github.com/gobtrfs/btrfs/internal/blockdev"
	"github.com/gobtrfs/btrfs/internal/txn"
)

// openWritableWith is OpenWritable with the transaction side's devices
// opened through scan (scan.Open, when set, opens each path). Tests put a
// device there that records, fails or tears the writes of a commit, to
// simulate a power loss at any write or sync, while the read side and
// the reopen after each Commit still read path itself, which sees every
// write that went through. OpenWritable is this with the zero options.
func openWritableWith(path string, opts *Options, scan blockdev.ScanOptions) (*FS, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	tfs, err := txn.OpenWith(append([]string{path}, o.Devices...), scan)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	tfs.SetNoPushRightShortcut(o.NoPushRightShortcut)
	fsys, err := Open(path, &o)
	if err != nil {
		tfs.Close()
		return nil, err
	}
	base, err := basePolicy(&o, fsys.sb.CsumType, uint64(fsys.sb.SectorSize))
	if err != nil {
		fsys.Close()
		tfs.Close()
		return nil, err
	}
	w := &writer{path: path, opts: o, tfs: tfs, base: base, maxInline: maxInline(&o, fsys.sb)}
	w.close = func() error {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.t != nil {
			w.t.Abort()
			w.t = nil
		}
		return w.tfs.Close()
	}
	fsys.w = w
	fsys.closers = append(fsys.closers, w.close)
	return fsys, nil
}
