package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/mkfs"
)

// The mkfs.btrfs 6.19 side of `gobtrfs mkfs`: its flags that gobtrfs's own
// did not have, in its syntax, and the name `mkfs.btrfs` (a symlink to
// gobtrfs answers as `gobtrfs mkfs`), so that image builders can call it
// in place of btrfs-progs (docs/design/0012-mkfs-drop-in.md).

// ProgsVersion is the btrfs-progs release whose mkfs.btrfs command line
// gobtrfs mkfs takes.
const ProgsVersion = "6.19"

// Args returns the command line to run for a process started as argv[0]
// with argv[1:]: gobtrfs's own, or, when the program's name is
// mkfs.btrfs, the mkfs command's.
func Args(argv []string) []string {
	if len(argv) == 0 {
		return nil
	}
	name := strings.TrimSuffix(filepath.Base(argv[0]), ".exe")
	if name == "mkfs.btrfs" {
		return append([]string{"mkfs"}, argv[1:]...)
	}
	return argv[1:]
}

// mkfsArgs checks the operands: one image or device, or none with a flag
// that only prints (-V, -O list-all).
func mkfsArgs(fl *mkfsFlags) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if fl.version || fl.listAll() {
			return nil
		}
		if len(args) > 1 {
			return usagef("%d devices given: gobtrfs makes single-device filesystems", len(args))
		}
		return cobra.ExactArgs(1)(cmd, args)
	}
}

// listAll reports -O list-all or -R list-all.
func (fl *mkfsFlags) listAll() bool {
	for _, s := range append(append([]string(nil), fl.features...), fl.runtimeFeatures...) {
		for _, one := range strings.Split(s, ",") {
			if strings.TrimSpace(one) == "list-all" {
				return true
			}
		}
	}
	return false
}

// mkfsInfoOnly handles the flags that print and exit: -V and -O list-all.
func mkfsInfoOnly(cmd *cobra.Command, fl *mkfsFlags) (bool, error) {
	out := cmd.OutOrStdout()
	switch {
	case fl.version:
		fmt.Fprintf(out, "mkfs.btrfs, part of gobtrfs %s (the command line of btrfs-progs v%s)\n", gobtrfsVersion(), ProgsVersion)
		fmt.Fprintln(out, "+LZO +ZSTD CRYPTO=builtin")
		return true, nil
	case fl.listAll():
		fmt.Fprintln(cmd.ErrOrStderr(), "Filesystem features available:")
		for _, f := range mkfs.FeatureList() {
			fmt.Fprintf(cmd.ErrOrStderr(), "%-19s - %s\n", f.Name, f.Description)
		}
		return true, nil
	}
	return false, nil
}

// gobtrfsVersion is the module version the binary was built from.
func gobtrfsVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}

// progsOptions applies the mkfs.btrfs flags that map onto build options:
// -O and -R, --device-uuid, -u/--subvol, --inode-flags, and the rules
// of which flags need an input.
func (fl *mkfsFlags) progsOptions(o *mkfs.BuildOptions) error {
	fo := &o.Format
	fo.Features = append(append([]string(nil), fl.features...), fl.runtimeFeatures...)
	if fl.mixed {
		fo.Features = append(fo.Features, "mixed-bg")
	}
	if fl.deviceUUID != "" {
		u, err := btrfs.ParseUUID(fl.deviceUUID)
		if err != nil || u.IsZero() {
			return usagef("--device-uuid %q: not a UUID", fl.deviceUUID)
		}
		fo.DeviceUUID = u
	}
	input := fl.rootDir != "" || fl.tarFile != ""
	for _, c := range []struct {
		set  bool
		name string
	}{{fl.shrink, "--shrink"}, {fl.reflink, "--reflink"}, {len(fl.subvols) > 0, "--subvol"},
		{len(fl.inodeFlags) > 0, "--inode-flags"}, {fl.compress != "", "--compress"}, {len(fl.snapshots) > 0, "--snapshot"}} {
		if c.set && !input {
			return usagef("%s must be used with --rootdir (or --tar)", c.name)
		}
	}
	if fl.reflink && fl.rootDir == "" {
		return usagef("--reflink must be used with --rootdir")
	}
	o.Reflink = fl.reflink
	for _, s := range fl.subvols {
		o.Subvols = append(o.Subvols, parseSubvolArg(s))
	}
	for _, s := range fl.snapshots {
		sn, err := parseSnapshotArg(s)
		if err != nil {
			return err
		}
		o.Snapshots = append(o.Snapshots, sn)
	}
	for _, s := range fl.inodeFlags {
		f, err := parseInodeFlagsArg(s)
		if err != nil {
			return err
		}
		o.InodeFlags = append(o.InodeFlags, f)
	}
	return nil
}

// parseSubvolArg reads --subvol [TYPE:]SUBDIR as mkfs.btrfs 6.19: a
// known TYPE before the first colon, else the whole argument is the
// directory (so "a:b" is the directory "a:b").
func parseSubvolArg(s string) mkfs.Subvolume {
	typ, dir, ok := strings.Cut(s, ":")
	if !ok {
		return mkfs.Subvolume{Path: s}
	}
	switch typ {
	case "rw":
		return mkfs.Subvolume{Path: dir}
	case "ro":
		return mkfs.Subvolume{Path: dir, ReadOnly: true}
	case "default":
		return mkfs.Subvolume{Path: dir, Default: true}
	case "default-ro":
		return mkfs.Subvolume{Path: dir, Default: true, ReadOnly: true}
	}
	return mkfs.Subvolume{Path: s}
}

// parseInodeFlagsArg reads --inode-flags FLAGS:PATH, FLAGS a comma
// separated list of nodatacow and nodatasum.
func parseInodeFlagsArg(s string) (mkfs.InodeFlags, error) {
	flags, p, ok := strings.Cut(s, ":")
	if !ok || p == "" {
		return mkfs.InodeFlags{}, usagef("--inode-flags %q: want FLAGS:PATH", s)
	}
	f := mkfs.InodeFlags{Path: p}
	for _, one := range strings.Split(flags, ",") {
		switch one {
		case "nodatacow":
			f.NoDataCow = true
		case "nodatasum":
			f.NoDataSum = true
		default:
			return f, usagef("--inode-flags %q: unknown flag %q (nodatacow, nodatasum)", s, one)
		}
	}
	return f, nil
}

// deterministicSeed applies DETERMINISTIC_SEED=1, the name btrfs-progs'
// reproducible-image work (its pull request 1126) gives the request for
// UUIDs derived from -U rather than random ones: it needs -U, and makes
// the build reproducible (the UUIDs then derive from -U and the input).
func deterministicSeed(o *mkfs.BuildOptions) error {
	v, ok := os.LookupEnv("DETERMINISTIC_SEED")
	if !ok || v == "" || v == "0" {
		return nil
	}
	if o.Format.UUID.IsZero() {
		return usagef("DETERMINISTIC_SEED=%s needs a fixed filesystem UUID (-U)", v)
	}
	o.Reproducible = true
	return nil
}

// parseSnapshotArg reads --snapshot SOURCE:DEST[:ro].
func parseSnapshotArg(s string) (mkfs.Snapshot, error) {
	parts := strings.Split(s, ":")
	sn := mkfs.Snapshot{}
	if len(parts) == 3 && parts[2] == "ro" {
		sn.ReadOnly = true
		parts = parts[:2]
	}
	if len(parts) != 2 || parts[0] == "" || parts[1] == "" {
		return sn, usagef("--snapshot %q: want SOURCE:DEST or SOURCE:DEST:ro", s)
	}
	sn.Source, sn.Dest = parts[0], parts[1]
	return sn, nil
}
