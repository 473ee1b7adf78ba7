package mkfs

import (
	"crypto/sha256"
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/disk"
)

// Subvolume is a directory of the input made a subvolume, as mkfs.btrfs
// 6.19's --subvol TYPE:SUBDIR: TYPE "rw" (the zero value), "ro"
// (ReadOnly), "default" (Default) or "default-ro" (both).
type Subvolume struct {
	// Path is relative to the top of the input.
	Path string
	// ReadOnly marks the subvolume read-only once it is filled.
	ReadOnly bool
	// Default makes it the subvolume the kernel mounts without a subvol=
	// option (at most one may be the default).
	Default bool
}

// Snapshot is a snapshot made once the filesystem is filled (gobtrfs
// mkfs --snapshot SOURCE:DEST[:ro]; mkfs.btrfs has no such option): of
// the subvolume whose top directory is Source ("." for the top level),
// at Dest. It shares the source's tree, so it costs one tree block, and
// the kernel writes both afterwards as it writes its own snapshots
// (gobtrfs itself does not yet write into a subvolume that shares its
// tree, docs/design/0023).
type Snapshot struct {
	// Source and Dest are paths from the top of the filesystem; Dest's
	// parent must exist (in the input, or as an earlier snapshot) and
	// must not be inside Source.
	Source, Dest string
	// ReadOnly makes a read-only snapshot.
	ReadOnly bool
}

// InodeFlags are mkfs.btrfs 6.19's --inode-flags FLAGS:PATH: the entry
// at Path and everything created below it in the same subvolume get
// the flags (a subvolume below Path starts afresh).
type InodeFlags struct {
	// Path is relative to the top of the input.
	Path string
	// NoDataCow is chattr +C: data overwritten in place, and (for
	// regular files) no data checksums.
	NoDataCow bool
	// NoDataSum keeps no data checksums.
	NoDataSum bool
}

// bits is the inode flags f asks for a regular file or directory; the
// write path adds NODATASUM to a NODATACOW regular file itself.
func (f InodeFlags) bits() uint64 {
	var b disk.InodeFlags
	if f.NoDataCow {
		b |= disk.InodeNoDataCow
	}
	if f.NoDataSum {
		b |= disk.InodeNoDataSum
	}
	return uint64(b)
}

// flagPlan is what the build does with Subvols and InodeFlags.
type flagPlan struct {
	subvols map[string]Subvolume  // by clean path
	flags   map[string]InodeFlags // by clean path
	used    map[string]bool       // flag paths met in the input
}

// planFlags checks opts' subvolumes and inode flags and adds the
// subvolumes to make (rw by default) to subvols.
func planFlags(opts *BuildOptions, subvols map[string]bool) (*flagPlan, error) {
	pl := &flagPlan{subvols: map[string]Subvolume{}, flags: map[string]InodeFlags{}, used: map[string]bool{}}
	defaults := 0
	for _, sv := range opts.Subvols {
		p, err := CleanPath(sv.Path)
		if err != nil || p == "." {
			return nil, fmt.Errorf("%w: --subvol %q: not a directory below the top", ErrInput, sv.Path)
		}
		if _, dup := pl.subvols[p]; dup {
			return nil, fmt.Errorf("%w: --subvol %q given twice", ErrInput, sv.Path)
		}
		if sv.Default {
			if defaults++; defaults > 1 {
				return nil, fmt.Errorf("%w: --subvol: the default subvolume can only be given once", ErrInput)
			}
		}
		sv.Path = p
		pl.subvols[p] = sv
		subvols[p] = true
	}
	for _, fl := range opts.InodeFlags {
		p, err := CleanPath(fl.Path)
		if err != nil {
			return nil, fmt.Errorf("%w: --inode-flags %q: %v", ErrInput, fl.Path, err)
		}
		if fl.bits() == 0 {
			return nil, fmt.Errorf("%w: --inode-flags %q: no flag", ErrInput, fl.Path)
		}
		old := pl.flags[p]
		old.NoDataCow = old.NoDataCow || fl.NoDataCow
		old.NoDataSum = old.NoDataSum || fl.NoDataSum
		old.Path = p
		pl.flags[p] = old
	}
	return pl, nil
}

// flagsFor is the inode flags entry p gets: those of the nearest of p and
// its ancestors that --inode-flags names, not looking past a subvolume
// (p itself may be one).
func (f *filler) flagsFor(p string) (uint64, string) {
	pl := f.plan
	if pl == nil || len(pl.flags) == 0 {
		return 0, ""
	}
	for q := p; ; q = path.Dir(q) {
		if fl, ok := pl.flags[q]; ok {
			return fl.bits(), q
		}
		if _, sub := f.subvols[q]; sub || q == "." {
			return 0, ""
		}
	}
}

// applyFlags gives a new regular file (still empty) or directory p the
// --inode-flags that cover it.
func (f *filler) applyFlags(p string) error {
	bits, from := f.flagsFor(p)
	if bits == 0 {
		return nil
	}
	if from == p {
		f.plan.used[p] = true
	}
	if err := f.fsys.SetInodeFlags(p, bits, 0); err != nil {
		return fmt.Errorf("--inode-flags on %q: %w", p, err)
	}
	return nil
}

// finishFlags runs after every entry: it refuses --inode-flags paths the
// input did not have (on other kinds of entry they are ignored, as
// mkfs.btrfs does), then makes the asked subvolumes read-only and the
// default, and sets the compression property of the top directory.
func (f *filler) finishFlags() error {
	pl := f.plan
	if pl == nil {
		return nil
	}
	for p := range pl.flags {
		if p == "." || pl.used[p] {
			continue
		}
		if _, err := f.fsys.Lstat(p); err != nil {
			return fmt.Errorf("%w: --inode-flags %q: no such path in the input", ErrInput, p)
		}
	}
	paths := make([]string, 0, len(pl.subvols))
	for p := range pl.subvols {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		sv := pl.subvols[p]
		if sv.Default {
			id, err := f.fsys.SubvolumeAt(p)
			if err == nil {
				err = f.fsys.SetDefaultSubvolume(id)
			}
			if err != nil {
				return fmt.Errorf("--subvol default:%s: %w", p, err)
			}
		}
		if sv.ReadOnly {
			id, err := f.fsys.SubvolumeAt(p)
			if err == nil {
				err = f.fsys.SetSubvolumeReadOnly(id, true)
			}
			if err != nil {
				return fmt.Errorf("--subvol ro:%s: %w", p, err)
			}
		}
	}
	return nil
}

// makeSnapshots makes the snapshots of opts, in order, once everything
// else is in place (a read-only source can be snapshotted; the snapshot
// holds the source's flags and properties).
func (f *filler) makeSnapshots() error {
	for _, sn := range f.opts.Snapshots {
		so := &btrfs.SnapshotOptions{ReadOnly: sn.ReadOnly, Time: f.now}
		if f.opts.Reproducible {
			h := sha256.New()
			h.Write(f.opts.Format.Seed)
			h.Write([]byte("\x00snapshot\x00" + sn.Dest))
			copy(so.UUID[:], h.Sum(nil))
		}
		src, dst := cleanInputPath(sn.Source), cleanInputPath(sn.Dest)
		if _, err := f.fsys.Snapshot(src, dst, so); err != nil {
			return fmt.Errorf("--snapshot %s:%s: %w", sn.Source, sn.Dest, err)
		}
		f.stats.Commits++ // the source's changes are committed first
	}
	return nil
}

// cleanInputPath is p as an io/fs path of the new filesystem ("." for
// the top).
func cleanInputPath(p string) string {
	p = strings.TrimPrefix(path.Clean("/"+p), "/")
	if p == "" {
		return "."
	}
	return p
}

// setCompressProperty records --compress as the top directory's
// compression property (`btrfs property set / compression ALG`), so the
// kernel and gobtrfs compress files made there later with it too.
func (f *filler) setCompressProperty() error {
	if f.opts.Compress == "" || !f.opts.CompressProperty || f.copying {
		return nil
	}
	if err := f.fsys.Setxattr(".", btrfs.PropCompression, []byte(f.opts.Compress)); err != nil {
		return fmt.Errorf("compression property: %w", err)
	}
	return nil
}
