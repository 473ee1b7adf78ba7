package btrfs

import (
	"errors"
	"fmt"
	"sync"

	"github.com/gobtrfs/btrfs/internal/blockdev"
)

// openReplayed is Open of a filesystem with a log tree: the log is
// replayed, exactly as OpenWritable replays it, into copy-on-write
// overlays of the devices (blockdev.Overlay: the writes stay in memory),
// and the read side opens on the overlays, so it shows what a kernel
// mount shows after its replay while the image stays untouched. A log
// this package cannot replay (a filesystem it does not write, or a
// logged item it does not know) is ignored, as mount -o nologreplay
// would, and FS.Warnings says so; a damaged log fails the open, as it
// fails a mount.
func openReplayed(path string, o Options) (*FS, error) {
	paths := append([]string{path}, o.Devices...)
	var (
		mu       sync.Mutex
		overlays = map[string]*blockdev.Overlay{}
	)
	closeAll := func() {
		for _, ov := range overlays {
			ov.CloseBase()
		}
	}
	wo := o
	wo.CommitInterval = -1
	scan := blockdev.ScanOptions{SuperFallback: o.SuperFallback, Open: func(p string, _ bool) (blockdev.Device, error) {
		f, err := blockdev.OpenFile(p, true)
		if err != nil {
			return nil, err
		}
		ov := blockdev.NewOverlay(f, true)
		mu.Lock()
		if old := overlays[p]; old != nil {
			old.CloseBase()
		}
		overlays[p] = ov
		mu.Unlock()
		return ov, nil
	}}
	wfs, err := openWritableWith(path, &wo, scan)
	if err == nil {
		err = wfs.Close()
	}
	if err != nil {
		closeAll()
		if !errors.Is(err, ErrUnsupported) {
			return nil, err
		}
		o.NoLogReplay = true
		fsys, oerr := Open(path, &o)
		if oerr != nil {
			return nil, oerr
		}
		fsys.warnings = append(fsys.warnings, fmt.Sprintf("log tree ignored (showing the last commit, without the changes fsync'd after it): %v", err))
		return fsys, nil
	}
	set, err := blockdev.ScanWith(paths, blockdev.ScanOptions{SuperFallback: o.SuperFallback,
		Open: func(p string, _ bool) (blockdev.Device, error) {
			mu.Lock()
			defer mu.Unlock()
			ov := overlays[p]
			if ov == nil {
				return nil, fmt.Errorf("%s: not opened for the log replay", p)
			}
			return ov.Reopen(false), nil
		}})
	if err != nil {
		closeAll()
		return nil, fmt.Errorf("%s: after log replay: %w", path, err)
	}
	fsys, err := openSet(set, o)
	if err != nil {
		set.Close()
		return nil, fmt.Errorf("%s: after log replay: %w", path, err)
	}
	return fsys, nil
}

// Warnings returns what the open found worth telling the user but did
// not refuse: today, a log tree Open could not replay and ignored.
func (fsys *FS) Warnings() []string { return append([]string(nil), fsys.warnings...) }
