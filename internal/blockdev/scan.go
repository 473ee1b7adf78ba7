package blockdev

import (
	"errors"
	"fmt"
	"os"
	"slices"

	"github.com/gobtrfs/btrfs/internal/disk"
)

// ScanOptions configures Scan. The zero value opens read-only files and
// trusts only primary superblocks, as the kernel does.
type ScanOptions struct {
	// Writable opens the devices read-write.
	Writable bool
	// SuperFallback accepts the best mirror superblock of a device whose
	// primary copy is unreadable or invalid.
	SuperFallback bool
	// Open opens one path; nil means OpenFile. Tests pass in-memory devices
	// through it.
	Open func(path string, readOnly bool) (Device, error)
}

// Member is one device of a Set.
type Member struct {
	Path      string
	Device    Device
	Super     *disk.Superblock // this device's superblock
	SuperCopy int              // which copy Super came from (0 = primary)
}

// DevID is the device id the member's superblock claims.
func (m *Member) DevID() disk.DevID { return m.Super.DevItem.DevID }

// Set is the group of devices forming one filesystem, found by Scan.
type Set struct {
	// FSID and MetadataFSID identify the filesystem (they differ only with
	// the METADATA_UUID feature).
	FSID, MetadataFSID disk.UUID
	// Super is the superblock to mount from: the first path's when it is
	// at the newest generation, else that of the first such device in
	// path order.
	Super *disk.Superblock
	// Members are the current devices by device id.
	Members map[disk.DevID]*Member
	// Stale are devices whose superblock generation is more than one
	// behind the newest one found; they were closed and are not used.
	Stale []*Member
	// Warnings describe devices skipped or found odd, one line each.
	Warnings []string
}

// Scan opens every path read-only, reads its primary superblock and groups
// the devices into a Set (see ScanWith).
func Scan(paths []string) (*Set, error) { return ScanWith(paths, ScanOptions{}) }

// ScanWith opens every path and reads its superblock. The first path names
// the filesystem: any other path holding a different filesystem is an error
// naming that path, as is a path that cannot be opened or holds no valid
// superblock. Devices are keyed by the devid in their superblock's dev_item.
// All devices are expected at the same generation: a device one generation
// behind the newest (a commit's superblock writes interrupted) is used with
// a warning; devices older than that are recorded in Set.Stale (with a
// warning) and closed. The same
// device given twice (same devid and device uuid) is used once; for a
// writable scan the same file named twice is not even opened twice (with a
// warning), since the second open would meet the first one's lock. On error
// every device opened so far is closed.
//
// Which devids are missing can only be known from the chunk tree's
// DEV_ITEMs; see Set.Missing.
func ScanWith(paths []string, opts ScanOptions) (*Set, error) {
	if len(paths) == 0 {
		return nil, errors.New("blockdev: scan of no devices")
	}
	open := opts.Open
	if open == nil {
		open = func(p string, ro bool) (Device, error) { return OpenFile(p, ro) }
	}
	var all []*Member
	fail := func(err error) (*Set, error) {
		for _, m := range all {
			m.Device.Close()
		}
		return nil, err
	}
	var again []string
	for i, p := range paths {
		if prev := sameFileBefore(paths[:i], p, opts); prev != "" {
			again = append(again, fmt.Sprintf("%s: same file as %s: ignored", p, prev))
			continue
		}
		m, err := scanOne(p, opts, open)
		if err != nil {
			return fail(err)
		}
		all = append(all, m)
		if first := all[0].Super; m.Super.FSID != first.FSID || m.Super.MetadataFSID() != first.MetadataFSID() {
			return fail(fmt.Errorf("%s: belongs to filesystem %s, not %s (named by %s)",
				p, m.Super.FSID, first.FSID, all[0].Path))
		}
	}
	s, err := group(all)
	if err != nil {
		return fail(err)
	}
	s.Warnings = append(s.Warnings, again...)
	return s, nil
}

// sameFileBefore returns the earlier path that names the same file as p,
// or "". Only writable scans ask: opening a file a second time for
// writing would meet the writer's lock of the first open (see OpenFile)
// and be refused as if another writer had it, where the caller only named
// one device twice. This holds whatever opts.Open wraps around the file;
// paths that are no files (in-memory devices of tests) are never the
// same. Read-only opens take no lock and are recognised as the same
// device by their superblocks (group).
func sameFileBefore(before []string, p string, opts ScanOptions) string {
	if !opts.Writable {
		return ""
	}
	st, err := os.Stat(p)
	if err != nil {
		return ""
	}
	for _, q := range before {
		if qs, err := os.Stat(q); err == nil && os.SameFile(st, qs) {
			return q
		}
	}
	return ""
}

// scanOne opens one path and reads its superblock.
func scanOne(path string, opts ScanOptions, open func(string, bool) (Device, error)) (*Member, error) {
	d, err := open(path, !opts.Writable)
	if err != nil {
		if _, ok := errors.AsType[*BusyError](err); ok {
			return nil, err // it names the path and says why
		}
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	sb, _, copyNo, err := ReadPrimarySuper(d, opts.SuperFallback)
	if err != nil {
		d.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if sb.DevItem.DevID == 0 {
		d.Close()
		return nil, fmt.Errorf("%s: %w", path, &disk.CorruptError{
			Physical: disk.SuperblockOffsetOf(copyNo), What: "superblock dev_item has devid 0"})
	}
	return &Member{Path: path, Device: d, Super: sb, SuperCopy: copyNo}, nil
}

// group keys the members by devid, keeping only the newest generation.
func group(all []*Member) (*Set, error) {
	var newest disk.Generation
	for _, m := range all {
		newest = max(newest, m.Super.Generation)
	}
	s := &Set{FSID: all[0].Super.FSID, MetadataFSID: all[0].Super.MetadataFSID(), Members: make(map[disk.DevID]*Member)}
	for _, m := range all {
		if m.SuperCopy != 0 {
			s.Warnings = append(s.Warnings, fmt.Sprintf("%s: primary superblock unusable, using copy %d", m.Path, m.SuperCopy))
		}
		if size := m.Device.Size(); m.Super.DevItem.TotalBytes > uint64(size) {
			s.Warnings = append(s.Warnings, fmt.Sprintf("%s: device has %d bytes but its dev_item claims %d: truncated?",
				m.Path, size, m.Super.DevItem.TotalBytes))
		}
		switch {
		case m.Super.Generation+1 < newest:
			s.Warnings = append(s.Warnings, fmt.Sprintf("%s: devid %d is at generation %d, filesystem at %d: skipped as stale",
				m.Path, m.DevID(), m.Super.Generation, newest))
			s.Stale = append(s.Stale, m)
			continue
		case m.Super.Generation < newest:
			// One commit behind: the power went while a commit wrote
			// the superblocks of the devices, one after the other, after
			// every device had synced the commit's blocks. The device
			// holds them; the kernel uses it too.
			s.Warnings = append(s.Warnings, fmt.Sprintf("%s: devid %d is at generation %d, filesystem at %d: used (a commit's superblock writes were interrupted)",
				m.Path, m.DevID(), m.Super.Generation, newest))
		}
		if prev, ok := s.Members[m.DevID()]; ok {
			if prev.Super.DevItem.UUID != m.Super.DevItem.UUID {
				return nil, fmt.Errorf("%s and %s both claim devid %d with different device uuids %s and %s",
					prev.Path, m.Path, m.DevID(), prev.Super.DevItem.UUID, m.Super.DevItem.UUID)
			}
			s.Warnings = append(s.Warnings, fmt.Sprintf("%s: same device as %s (devid %d): ignored", m.Path, prev.Path, m.DevID()))
			s.Stale = append(s.Stale, m)
			continue
		}
		s.Members[m.DevID()] = m
		if s.Super == nil && m.Super.Generation == newest {
			s.Super = m.Super
		}
	}
	if s.Super == nil {
		for _, m := range all {
			if m.Super.Generation == newest {
				s.Super = m.Super
				break
			}
		}
	}
	for _, m := range s.Stale {
		m.Device.Close()
	}
	return s, nil
}

// Devices returns the current devices by devid, the form chunk.Reader
// takes. The map is new; the devices are the set's own.
func (s *Set) Devices() map[disk.DevID]Device {
	out := make(map[disk.DevID]Device, len(s.Members))
	for id, m := range s.Members {
		out[id] = m.Device
	}
	return out
}

// DevIDs returns the devids present, ascending.
func (s *Set) DevIDs() []disk.DevID {
	ids := make([]disk.DevID, 0, len(s.Members))
	for id := range s.Members {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// Missing returns, ascending, the devids in want (typically those of the
// chunk tree's DEV_ITEMs) that no current device provides.
func (s *Set) Missing(want []disk.DevID) []disk.DevID {
	var out []disk.DevID
	for _, id := range want {
		if _, ok := s.Members[id]; !ok && !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// CheckComplete checks the devids that chunks use (used: the superblock's
// system chunks, later the whole chunk tree) against the set. A devid absent while fewer devices are present
// than the superblock's num_devices is a missing device, for the caller to
// handle (degraded reads). Absent while every counted device is present,
// the superblock contradicts itself (a damaged dev_item devid, stripe or
// num_devices): that is corruption, not a device to go looking for.
func (s *Set) CheckComplete(used []disk.DevID) error {
	if uint64(len(s.Members)) < s.Super.NumDevices {
		return nil
	}
	for _, id := range used {
		if _, ok := s.Members[id]; !ok {
			return &disk.CorruptError{Physical: disk.SuperblockOffsetOf(0),
				What: fmt.Sprintf("chunks use devid %d, but the superblock counts %d device(s) and all are present (devids %v)",
					id, s.Super.NumDevices, s.DevIDs())}
		}
	}
	return nil
}

// Close closes every current device.
func (s *Set) Close() error {
	var errs []error
	for _, id := range s.DevIDs() {
		if err := s.Members[id].Device.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close %s: %w", s.Members[id].Path, err))
		}
	}
	return errors.Join(errs...)
}
