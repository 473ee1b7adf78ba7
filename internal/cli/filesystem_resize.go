package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gobtrfs/btrfs"
)

// btrfs filesystem label and resize, offline on an image or block device
// (btrfs-progs works on a mount point, or on an unmounted device for
// label and, since 6.x, resize --offline).

func newFilesystemLabelCommand() *cobra.Command {
	var ff fsFlags
	cmd := &cobra.Command{
		Use:   "label IMAGE [LABEL]",
		Short: "Print or change the filesystem's label",
		Long: `With one argument print the label of the filesystem in IMAGE (an empty line
when it has none); with LABEL, set it, as btrfs filesystem label does on an
unmounted device. A label is at most 255 bytes.`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				fsys, err := ff.open(args[0], warner(cmd))
				if err != nil {
					return err
				}
				defer fsys.Close()
				_, err = fmt.Fprintln(cmd.OutOrStdout(), fsys.Label())
				return err
			}
			label := args[1]
			if len(label) > 255 {
				return fmt.Errorf("label %s is too long (max %d)", label, 255)
			}
			fsys, err := openImage(args[0], &btrfs.Options{Devices: ff.devices, SuperFallback: ff.superFallback}, true, warner(cmd))
			if err != nil {
				return err
			}
			if err := fsys.SetLabel(label); err != nil {
				return errors.Join(err, fsys.Rollback(), fsys.Close())
			}
			return errors.Join(fsys.Commit(), fsys.Close())
		},
	}
	ff.register(cmd)
	return cmd
}

// resizeSpec is a parsed [DEVID:][+|-]SIZE|[DEVID:]max.
type resizeSpec struct {
	devid uint64
	max   bool
	sign  int // +1 grow by, -1 shrink by, 0 absolute
	size  uint64
}

// parseResize parses the size argument as btrfs-progs does.
func parseResize(arg string) (resizeSpec, error) {
	s := resizeSpec{devid: 1}
	rest := arg
	if i := strings.IndexByte(arg, ':'); i >= 0 {
		id, err := strconv.ParseUint(arg[:i], 10, 64)
		if err != nil || id == 0 {
			return s, usagef("invalid devid: %s", arg[:i])
		}
		s.devid, rest = id, arg[i+1:]
	}
	if rest == "max" {
		s.max = true
		return s, nil
	}
	switch {
	case strings.HasPrefix(rest, "+"):
		s.sign, rest = 1, rest[1:]
	case strings.HasPrefix(rest, "-"):
		s.sign, rest = -1, rest[1:]
	}
	n, err := parseProgsSize(rest)
	if err != nil {
		return s, usagef("failed to parse size %s", rest)
	}
	s.size = n
	return s, nil
}

// parseProgsSize parses a number with an optional binary suffix
// (kKmMgGtTpPeE), as progs' parse_size_from_string.
func parseProgsSize(v string) (uint64, error) {
	if v == "" {
		return 0, errors.New("empty size")
	}
	mult := uint64(1)
	if i := strings.IndexByte("kmgtpe", lower(v[len(v)-1])); i >= 0 {
		mult = 1 << (10 * (i + 1))
		v = v[:len(v)-1]
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, err
	}
	if n != 0 && n*mult/mult != n {
		return 0, errors.New("size overflows")
	}
	return n * mult, nil
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

func newFilesystemResizeCommand() *cobra.Command {
	var ff fsFlags
	cmd := &cobra.Command{
		Use:   "resize [DEVID:][+|-]SIZE[kKmMgGtTpPeE]|[DEVID:]max IMAGE",
		Short: "Grow or shrink a device of the filesystem",
		Long: `Resize device DEVID (1 by default) of the filesystem in IMAGE, offline, as
btrfs filesystem resize does on a mount: SIZE is the new size, +SIZE and
-SIZE change it by that much, max makes it as large as the device (an image
file's size). Growing an image file past its end extends the file; a block
device cannot grow. Shrinking truncates the device's image file, and moves
what the chunks past the new end hold elsewhere (on a multi-device
filesystem, to chunks on the devices with room; name the other devices
with --device); when it cannot fit, nothing changes. Suffixes are binary: 1k is 1024 bytes.`,
		// -1G is a size, not a flag: the command sorts its arguments
		// itself (progs' getopt stops at the size the same way).
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			args, help, err := resizeArgs(cmd, args)
			if err != nil || help {
				return err
			}
			if len(args) != 2 {
				return usagef("accepts 2 arg(s), received %d", len(args))
			}
			spec, err := parseResize(args[0])
			if err != nil {
				return err
			}
			return resizeImage(cmd, &ff, spec, args[1])
		},
	}
	ff.register(cmd)
	cmd.Flags().Bool("help", false, "help for resize")
	return cmd
}

// resizeArgs parses the flags among args, leaving the operands: an
// argument that starts with a minus and a digit, or DEVID:-, is a size.
func resizeArgs(cmd *cobra.Command, args []string) (operands []string, help bool, err error) {
	var flags []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			operands = append(operands, args[i+1:]...)
			i = len(args)
		case a == "--help" || a == "-h":
			return nil, true, cmd.Help()
		case !strings.HasPrefix(a, "-") || len(a) > 1 && a[1] >= '0' && a[1] <= '9':
			operands = append(operands, a)
		default:
			flags = append(flags, a)
			if (a == "-d" || a == "--device") && i+1 < len(args) {
				flags = append(flags, args[i+1])
				i++
			}
		}
	}
	if err := cmd.Flags().Parse(flags); err != nil {
		return nil, false, usagef("%v", err)
	}
	return operands, false, nil
}

// resizeImage runs one resize: the current size and the device's
// capacity are read first, an image file is extended before the
// writable open when growing past its end (and cut back if the resize
// fails).
func resizeImage(cmd *cobra.Command, ff *fsFlags, spec resizeSpec, image string) error {
	opts := &btrfs.Options{Devices: ff.devices, SuperFallback: ff.superFallback}
	fsys, err := openImage(image, opts, false, warner(cmd))
	if err != nil {
		return err
	}
	info, err := fsys.Info()
	fsys.Close()
	if err != nil {
		return err
	}
	var dev *btrfs.DeviceInfo
	for i := range info.Devices {
		if info.Devices[i].ID == spec.devid {
			dev = &info.Devices[i]
		}
	}
	if dev == nil {
		return fmt.Errorf("invalid device id %d", spec.devid)
	}
	if dev.Missing {
		return fmt.Errorf("device %d is missing: name it with --device", spec.devid)
	}
	fi, err := os.Stat(dev.Path)
	if err != nil {
		return err
	}
	capacity, err := deviceCapacity(dev.Path, fi)
	if err != nil {
		return err
	}
	cur := dev.TotalBytes
	size := spec.size
	switch {
	case spec.max:
		size = capacity
	case spec.sign > 0:
		size = cur + spec.size
		if size < cur {
			return fmt.Errorf("unable to resize '%s': Invalid argument", image)
		}
	case spec.sign < 0:
		if spec.size > cur {
			return fmt.Errorf("unable to resize '%s': Invalid argument", image)
		}
		size = cur - spec.size
	}
	// The library's rounding, done here so that the file is extended to
	// what the filesystem will take: sectors when growing, whole 64 KiB
	// stripe elements when shrinking.
	if size > cur {
		size = max(cur, size/uint64(info.SectorSize)*uint64(info.SectorSize))
	} else {
		size = size / (64 << 10) * (64 << 10)
	}
	regular := fi.Mode().IsRegular()
	if size > capacity && !regular {
		return fmt.Errorf("unable to resize '%s': device %s holds only %d bytes: File too large", image, dev.Path, capacity)
	}
	extended := false
	if size > capacity {
		if err := os.Truncate(dev.Path, int64(size)); err != nil {
			return err
		}
		extended = true
	}
	undo := func(err error) error {
		if extended {
			err = errors.Join(err, os.Truncate(dev.Path, fi.Size()))
		}
		return err
	}
	wfs, err := openImage(image, opts, true, warner(cmd))
	if err != nil {
		return undo(err)
	}
	_, err = wfs.Resize(spec.devid, size)
	if err != nil {
		if errors.Is(err, btrfs.ErrNoSpace) {
			// Say why, which the generic ENOSPC wording would hide.
			err = fmt.Errorf("unable to resize '%s': No space left on device (%s)", image, err)
		}
		return undo(errors.Join(err, wfs.Close()))
	}
	if err := wfs.Close(); err != nil {
		return err
	}
	after, err := btrfs.Open(image, opts)
	if err != nil {
		return err
	}
	defer after.Close()
	ai, err := after.Info()
	if err != nil {
		return err
	}
	for _, d := range ai.Devices {
		if d.ID == spec.devid {
			var u unitFlags
			fmt.Fprintf(cmd.OutOrStdout(), "Resize device id %d (%s) from %s to %s\n", spec.devid, canonicalPath(dev.Path), u.format(cur), u.format(d.TotalBytes))
		}
	}
	return nil
}

// deviceCapacity is how many bytes the device or image file at path
// holds: a block device stats as 0 and is asked.
func deviceCapacity(path string, fi os.FileInfo) (uint64, error) {
	if fi.Mode().IsRegular() {
		return uint64(fi.Size()), nil
	}
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	end, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return 0, err
	}
	return uint64(end), nil
}
