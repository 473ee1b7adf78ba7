package cli

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gobtrfs/btrfs"
)

// btrfs filesystem show, df and du on an image, as btrfs-progs 6.2 prints
// them for an unmounted device (show) or a mount of it (df, du).

func newFilesystemCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "filesystem",
		Short: "Filesystem commands (show, df, du, label, resize)",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return usagef("missing subcommand; see --help") },
	}
	cmd.AddCommand(newFilesystemShowCommand(), newFilesystemDfCommand(), newFilesystemDuCommand(),
		newFilesystemLabelCommand(), newFilesystemResizeCommand())
	return cmd
}

// showJSON is filesystem show --json.
type showJSON struct {
	Label     string           `json:"label"`
	UUID      string           `json:"uuid"`
	Devices   uint64           `json:"total_devices"`
	BytesUsed uint64           `json:"bytes_used"`
	DevList   []showDeviceJSON `json:"devices"`
}

type showDeviceJSON struct {
	DevID   uint64 `json:"devid"`
	Size    uint64 `json:"size"`
	Used    uint64 `json:"used"`
	Path    string `json:"path,omitempty"`
	Missing bool   `json:"missing"`
}

func newFilesystemShowCommand() *cobra.Command {
	var (
		ff    fsFlags
		units unitFlags
		jsonF bool
	)
	cmd := &cobra.Command{
		Use:   "show IMAGE",
		Short: "Show the filesystem's devices and use",
		Long: `Print the label, UUID, devices and space used as btrfs filesystem show prints
them for an unmounted device or image: every device the filesystem records,
with the absolute path it was opened from (IMAGE and --device), and
"*** Some devices missing" when some are not given.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			fsys, err := ff.open(args[0], warner(cmd))
			if err != nil {
				return err
			}
			defer fsys.Close()
			info, err := fsys.Info()
			if err != nil {
				return err
			}
			j := showJSON{Label: info.Label, UUID: info.UUID, Devices: info.NumDevices, BytesUsed: info.BytesUsed}
			for _, d := range info.Devices {
				p := d.Path
				if p != "" {
					p = canonicalPath(p)
				}
				j.DevList = append(j.DevList, showDeviceJSON{DevID: d.ID, Size: d.TotalBytes, Used: d.BytesUsed, Path: p, Missing: d.Missing})
			}
			if jsonF {
				return writeJSON(cmd.OutOrStdout(), j)
			}
			var b strings.Builder
			if info.Label == "" {
				b.WriteString("Label: none ")
			} else {
				fmt.Fprintf(&b, "Label: '%s' ", info.Label)
			}
			fmt.Fprintf(&b, " uuid: %s\n", info.UUID)
			fmt.Fprintf(&b, "\tTotal devices %d FS bytes used %s\n", info.NumDevices, units.format(info.BytesUsed))
			missing := false
			for _, d := range j.DevList {
				if d.Missing {
					missing = true
					continue
				}
				fmt.Fprintf(&b, "\tdevid %4d size %s used %s path %s\n", d.DevID, units.format(d.Size), units.format(d.Used), d.Path)
			}
			if missing {
				b.WriteString("\t*** Some devices missing\n")
			}
			b.WriteString("\n")
			_, err = cmd.OutOrStdout().Write([]byte(b.String()))
			return err
		},
	}
	ff.register(cmd)
	units.register(cmd, false)
	cmd.Flags().BoolVar(&jsonF, "json", false, "print a JSON object (sizes in bytes)")
	return cmd
}

// canonicalPath is the absolute path without symbolic links, as progs
// prints device paths (realpath).
func canonicalPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		p = a
	}
	if r, err := filepath.EvalSymlinks(p); err == nil {
		p = r
	}
	return p
}

func newFilesystemDfCommand() *cobra.Command {
	var (
		ff    fsFlags
		units unitFlags
		jsonF bool
	)
	cmd := &cobra.Command{
		Use:   "df IMAGE",
		Short: "Show space use by block group type and profile",
		Long: `Print the space allocated to block groups and used in them, by type and
profile, as btrfs filesystem df does on a mount of the image. GlobalReserve
is the size the kernel gives its global reserve when it mounts the image
(Linux 6.x's formula), with nothing used. With --json, an array of {type,
profile, total, used} in bytes.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			fsys, err := ff.open(args[0], warner(cmd))
			if err != nil {
				return err
			}
			defer fsys.Close()
			space, err := fsys.Space()
			if err != nil {
				return err
			}
			if jsonF {
				return writeJSON(cmd.OutOrStdout(), space)
			}
			var b strings.Builder
			for _, s := range space {
				fmt.Fprintf(&b, "%s, %s: total=%s, used=%s\n", s.Type, s.Profile, units.format(s.Total), units.format(s.Used))
			}
			_, err = cmd.OutOrStdout().Write([]byte(b.String()))
			return err
		},
	}
	ff.register(cmd)
	units.register(cmd, true)
	cmd.Flags().BoolVar(&jsonF, "json", false, "print a JSON array (sizes in bytes)")
	return cmd
}

// duJSON is one line of filesystem du --json.
type duJSON struct {
	Path      string  `json:"path"`
	Total     uint64  `json:"total"`
	Exclusive uint64  `json:"exclusive"`
	SetShared *uint64 `json:"set_shared,omitempty"`
}

func newFilesystemDuCommand() *cobra.Command {
	var (
		ff        fsFlags
		units     unitFlags
		summarize bool
		jsonF     bool
	)
	cmd := &cobra.Command{
		Use:   "du [-s] IMAGE:PATH...",
		Short: "Summarize disk use of files, shared extents apart",
		Long: `Print for every file and directory below each PATH the bytes of its data
extents (Total), those no other file or subvolume refers to (Exclusive), and,
for each PATH, the bytes of the extents shared among its files (Set shared),
as btrfs filesystem du does on a mount: inline data and holes count nothing,
a file with several links counts once, directories after their entries in
directory order. With -s only the line of each PATH. --json prints the lines
as an array of {path, total, exclusive, set_shared} in bytes.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var lines []duJSON
			for _, a := range args {
				image, p := splitImagePath(a)
				fsys, err := ff.open(image, warner(cmd))
				if err != nil {
					return err
				}
				d := &duWalk{fsys: fsys, seen: map[[2]uint64]bool{}, summarize: summarize}
				_, _, err = d.count(p, strings.TrimSuffix(a, "/"), true)
				fsys.Close()
				if err != nil {
					return err
				}
				lines = append(lines, d.lines...)
			}
			if jsonF {
				return writeJSON(cmd.OutOrStdout(), lines)
			}
			var b strings.Builder
			fmt.Fprintf(&b, "%10s  %10s  %10s  %s\n", "Total", "Exclusive", "Set shared", "Filename")
			for _, l := range lines {
				shared := "-"
				if l.SetShared != nil {
					shared = units.format(*l.SetShared)
				}
				fmt.Fprintf(&b, "%10s  %10s  %10s  %s\n", units.format(l.Total), units.format(l.Exclusive), shared, l.Path)
			}
			_, err := cmd.OutOrStdout().Write([]byte(b.String()))
			return err
		},
	}
	ff.register(cmd)
	cmd.Flags().BoolVarP(&summarize, "summarize", "s", false, "print only the total of each argument")
	units.register(cmd, false)
	cmd.Flags().BoolVar(&jsonF, "json", false, "print a JSON array (sizes in bytes)")
	return cmd
}

// duWalk is the state of one du argument.
type duWalk struct {
	fsys      *btrfs.FS
	seen      map[[2]uint64]bool // (subvolume, inode) of files counted
	shared    [][2]uint64        // shared physical ranges [start, end)
	summarize bool
	lines     []duJSON
}

// count returns the totals of p (shown as show) and adds the lines of p
// and what is below it; top marks an argument, whose line has the
// set-shared column and is printed with -s too.
func (d *duWalk) count(p, show string, top bool) (total, excl uint64, err error) {
	fi, err := d.fsys.Lstat(p)
	if err != nil {
		return 0, 0, err
	}
	st, _ := fi.Sys().(*btrfs.Stat)
	switch {
	case fi.Mode().IsRegular():
		if st != nil {
			key := [2]uint64{st.Subvolume, st.Ino}
			if d.seen[key] {
				return 0, 0, nil
			}
			d.seen[key] = true
		}
		exts, err := d.fsys.FileExtents(p)
		if err != nil {
			return 0, 0, err
		}
		for _, e := range exts {
			if e.Inline || e.Length == 0 {
				continue
			}
			total += e.Length
			if !e.Shared {
				excl += e.Length
				continue
			}
			// FIEMAP's physical address of a range: where its bytes sit,
			// the extent's start for compressed data.
			start := e.DiskAddr
			if !e.Compressed {
				start += e.ExtentOffset
			}
			d.shared = append(d.shared, [2]uint64{start, start + e.Length})
		}
	case fi.IsDir():
		ents, err := readDirIndexOrder(d.fsys, p)
		if err != nil {
			return 0, 0, err
		}
		for _, e := range ents {
			q := e.Name()
			if p != "." {
				q = p + "/" + q
			}
			t, x, err := d.count(q, show+"/"+e.Name(), false)
			if err != nil {
				return 0, 0, err
			}
			total += t
			excl += x
		}
	default:
		return 0, 0, nil
	}
	switch {
	case top:
		set := sharedUnion(d.shared)
		d.lines = append(d.lines, duJSON{Path: show, Total: total, Exclusive: excl, SetShared: &set})
	case !d.summarize:
		d.lines = append(d.lines, duJSON{Path: show, Total: total, Exclusive: excl})
	}
	return total, excl, nil
}

// readDirIndexOrder lists a directory in the order its entries were made
// (the kernel's readdir order), not sorted by name.
func readDirIndexOrder(fsys *btrfs.FS, p string) ([]fs.DirEntry, error) {
	f, err := fsys.OpenFile(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.ReadDir(-1)
}

// sharedUnion is the number of bytes the ranges cover together.
func sharedUnion(rs [][2]uint64) uint64 {
	sort.Slice(rs, func(i, j int) bool { return rs[i][0] < rs[j][0] })
	var n, end uint64
	for _, r := range rs {
		if r[1] <= end {
			continue
		}
		if r[0] < end {
			r[0] = end
		}
		n += r[1] - r[0]
		end = r[1]
	}
	return n
}
