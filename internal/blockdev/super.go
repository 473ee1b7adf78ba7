package blockdev

import (
	"errors"
	"fmt"

	"github.com/gobtrfs/btrfs/internal/disk"
)

// ErrNoSuper is returned for a superblock copy whose position lies beyond
// the end of the device: such copies are never written, which is normal for
// the mirrors of small devices.
var ErrNoSuper = errors.New("superblock copy beyond end of device")

// ReadSuper reads superblock copy i (0 = primary at 64 KiB, 1 at 64 MiB, 2
// at 256 GiB) and returns it decoded together with its raw 4096 bytes. The
// copy must carry the btrfs magic, a valid checksum and pass
// disk.Superblock.Validate (which includes bytenr matching the offset it was
// read from). Corruption errors wrap disk.ErrCorrupt and name the copy and
// device offset.
func ReadSuper(d Device, i int) (*disk.Superblock, []byte, error) {
	if i < 0 || i >= disk.SuperMirrorMax {
		return nil, nil, fmt.Errorf("blockdev: superblock copy %d does not exist", i)
	}
	off := disk.SuperblockOffsetOf(i)
	if int64(off)+disk.SuperblockSize > d.Size() {
		return nil, nil, fmt.Errorf("superblock copy %d at device offset %d (device size %d): %w", i, off, d.Size(), ErrNoSuper)
	}
	raw := make([]byte, disk.SuperblockSize)
	if n, err := d.ReadAt(raw, int64(off)); n < len(raw) {
		if err == nil {
			err = errShortPage
		}
		return nil, nil, fmt.Errorf("read superblock copy %d at device offset %d: %w", i, off, err)
	}
	s := new(disk.Superblock)
	bad := func(what string, err error) error {
		return &disk.CorruptError{Physical: off, What: fmt.Sprintf("superblock copy %d: %s", i, what), Err: err}
	}
	if err := s.Decode(raw); err != nil {
		return nil, nil, bad("undecodable", err)
	}
	if s.Magic != disk.Magic {
		return nil, nil, bad(fmt.Sprintf("bad magic 0x%016x, not a btrfs superblock", s.Magic), nil)
	}
	if !s.CsumType.Valid() {
		return nil, nil, bad(fmt.Sprintf("unknown checksum type %d", uint16(s.CsumType)), nil)
	}
	if !s.CsumType.VerifyBlock(raw) {
		return nil, nil, bad(s.CsumType.String()+" checksum mismatch", nil)
	}
	if err := s.Validate(off); err != nil {
		return nil, nil, bad("invalid", err)
	}
	return s, raw, nil
}

// ReadBestSuper reads every superblock copy that fits on the device and
// returns the valid one with the highest generation (the lowest copy number
// on a tie), with its raw bytes and copy number. This is what repair tools
// use; the kernel mounts from the primary copy only (see ReadPrimarySuper).
// If no copy is valid the error lists why each failed.
func ReadBestSuper(d Device) (*disk.Superblock, []byte, int, error) {
	var (
		best    *disk.Superblock
		bestRaw []byte
		bestI   = -1
		errs    []error
	)
	for i := range disk.SuperMirrorMax {
		s, raw, err := ReadSuper(d, i)
		if err != nil {
			if !errors.Is(err, ErrNoSuper) {
				errs = append(errs, err)
			}
			continue
		}
		if best == nil || s.Generation > best.Generation {
			best, bestRaw, bestI = s, raw, i
		}
	}
	if best == nil {
		if len(errs) == 0 {
			errs = append(errs, fmt.Errorf("device of %d bytes has no room for a superblock: %w", d.Size(), ErrNoSuper))
		}
		return nil, nil, -1, fmt.Errorf("no valid superblock: %w", errors.Join(errs...))
	}
	return best, bestRaw, bestI, nil
}

// ReadPrimarySuper reads the primary superblock, as the kernel does when
// mounting. If that fails and fallback is set, it returns the best mirror
// instead (ReadBestSuper); the returned int is the copy used.
func ReadPrimarySuper(d Device, fallback bool) (*disk.Superblock, []byte, int, error) {
	s, raw, err := ReadSuper(d, 0)
	if err == nil {
		return s, raw, 0, nil
	}
	if !fallback {
		return nil, nil, -1, err
	}
	s, raw, i, err2 := ReadBestSuper(d)
	if err2 != nil {
		return nil, nil, -1, err2
	}
	return s, raw, i, nil
}
