package btrfs

import (
	"errors"
	"fmt"

	"github.com/gobtrfs/btrfs/internal/disk"

	"github.com/gobtrfs/btrfs/internal/blockdev"
	"github.com/gobtrfs/btrfs/internal/txn"
)

// openWritableWith is OpenWritable with the transaction side's devices
// opened through scan (scan.Open, when set, opens each path). Tests put a
// device there that records, fails or tears the writes of a commit, to
// simulate a power loss at any write or sync; the read side reads through
// the same devices. OpenWritable is this with the zero options.
func openWritableWith(path string, opts *Options, scan blockdev.ScanOptions) (*FS, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	// The devices are opened once, by the transaction side, each under a
	// write-through cache: the read side reads tree blocks through the
	// same caches, so every block a commit writes is what it reads next.
	inner := scan.Open
	if inner == nil {
		inner = func(p string, ro bool) (blockdev.Device, error) { return blockdev.OpenFile(p, ro) }
	}
	budget := o.cacheBytes() / 4
	scan.Open = func(p string, ro bool) (blockdev.Device, error) {
		d, err := inner(p, ro)
		if err != nil {
			return nil, err
		}
		c, err := blockdev.NewCache(d, blockdev.CacheOptions{Budget: budget})
		if err != nil {
			d.Close()
			return nil, err
		}
		return c, nil
	}
	tfs, err := txn.OpenWith(append([]string{path}, o.Devices...), scan)
	if err != nil {
		if b, ok := errors.AsType[*blockdev.BusyError](err); ok && b.Path == path {
			return nil, err // it names the path already
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	tfs.SetNoPushRightShortcut(o.NoPushRightShortcut)
	fsys, err := openShared(tfs, o)
	if err != nil {
		tfs.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	// The write side reads committed tree blocks through the read side's
	// cache of verified blocks, and hands it every block a commit writes.
	tfs.SetBlockCache(fsys.br)
	// And commits write their data behind (txn.Flight): reads of file
	// data wait until what they may read has landed.
	fsys.data = &landedReader{base: fsys.data, tfs: tfs}
	base, err := basePolicy(&o, fsys.sb.CsumType, uint64(fsys.sb.SectorSize))
	if err != nil {
		tfs.Close()
		return nil, err
	}
	w := &writer{path: path, opts: o, tfs: tfs, base: base, maxInline: maxInline(&o, fsys.sb), limit: o.dirtyLimit(), readWindow: readWindow}
	w.close = func() error { return w.closeWriter(fsys) }
	fsys.w = w
	w.main = fsys
	fsys.publish()
	fsys.closers = []closerFunc{w.close}
	// A log the kernel left is replayed and committed before anything
	// else may change (logreplay.go).
	if err := fsys.replayLog(); err != nil {
		fsys.Close()
		return nil, fmt.Errorf("%s: replay log: %w", path, err)
	}
	// So are the drops of deleted subvolumes the kernel's cleaner left
	// unfinished (write_subvol_delete.go).
	if err := fsys.finishDrops(); err != nil {
		fsys.Close()
		return nil, fmt.Errorf("%s: finish dropping deleted subvolumes: %w", path, err)
	}
	if iv := o.commitInterval(); iv > 0 {
		fsys.startCommitter(iv)
	}
	return fsys, nil
}

// openShared makes the read side of a writable FS over the transaction
// side's devices (each a blockdev.Cache, see openWritableWith) and chunk
// map.
func openShared(tfs *txn.FS, o Options) (*FS, error) {
	set := tfs.Set()
	cached := set.Devices()
	raw := make(map[disk.DevID]blockdev.Device, len(cached))
	for id, d := range cached {
		raw[id] = d
		if c, ok := d.(*blockdev.Cache); ok {
			raw[id] = c.Device()
		}
	}
	sb := tfs.Super()
	return openVolume(newVolume(set, &sb, tfs.Chunks(), cached, raw, o))
}
