package btrfs

import (
	"fmt"
	"io"

	"github.com/gobtrfs/btrfs/internal/blockdev"
)

// Device is a read-only source of filesystem bytes for OpenDevices: an
// image held in memory, a network block device, a section of a larger file.
type Device interface {
	io.ReaderAt
	// Size is the device size in bytes.
	Size() int64
}

// OpenDevices opens a filesystem from devices the caller provides, in any
// order: the first names the filesystem, the others are matched by fsid and
// devid. opts.Devices is ignored.
func OpenDevices(devs []Device, opts *Options) (*FS, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	names := make([]string, len(devs))
	byName := make(map[string]Device, len(devs))
	for i, d := range devs {
		names[i] = fmt.Sprintf("device %d", i)
		byName[names[i]] = d
	}
	open := func(name string, _ bool) (blockdev.Device, error) { return roDevice{byName[name]}, nil }
	set, err := blockdev.ScanWith(names, blockdev.ScanOptions{SuperFallback: o.SuperFallback, Open: open})
	if err != nil {
		return nil, err
	}
	fsys, err := openSet(set, o)
	if err != nil {
		set.Close()
		return nil, err
	}
	return fsys, nil
}

// roDevice adapts a Device to blockdev.Device, refusing writes.
type roDevice struct{ Device }

func (roDevice) WriteAt([]byte, int64) (int, error) { return 0, blockdev.ErrReadOnly }
func (roDevice) Sync() error                        { return nil }
func (roDevice) Close() error                       { return nil }
