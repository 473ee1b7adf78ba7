package cli

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gobtrfs/btrfs"
)

// The subvolume verbs of btrfs-progs that work on an image: create, show,
// get-default and set-default, printing what `btrfs subvolume` 6.2 prints
// on a kernel mount of the same image.

// subvolJSON is one subvolume in --json output: snake_case keys, as every
// gobtrfs command prints them.
type subvolJSON struct {
	ID           uint64 `json:"id"`
	ParentID     uint64 `json:"parent_id"`
	Path         string `json:"path"`
	Generation   uint64 `json:"generation"`
	CTransID     uint64 `json:"ctransid"`
	OTransID     uint64 `json:"otransid"`
	STransID     uint64 `json:"stransid"`
	RTransID     uint64 `json:"rtransid"`
	UUID         string `json:"uuid"`
	ParentUUID   string `json:"parent_uuid"`
	ReceivedUUID string `json:"received_uuid"`
	ReadOnly     bool   `json:"read_only"`
	Ctime        string `json:"ctime"`
	Otime        string `json:"otime"`
	Stime        string `json:"stime,omitempty"`
	Rtime        string `json:"rtime,omitempty"`
	// Snapshots are the paths of the snapshots of this subvolume
	// (subvolume show only).
	Snapshots []string `json:"snapshots,omitempty"`
}

// rfc3339 prints t in RFC 3339 with nanoseconds in UTC, "" for the epoch
// (a time never set).
func rfc3339(t time.Time) string {
	if t.Unix() == 0 && t.Nanosecond() == 0 {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

func subvolToJSON(s btrfs.SubvolumeInfo) subvolJSON {
	return subvolJSON{ID: s.ID, ParentID: s.ParentID, Path: s.Path, Generation: s.Generation,
		CTransID: s.CTransID, OTransID: s.OTransID, STransID: s.STransID, RTransID: s.RTransID,
		UUID: s.UUID, ParentUUID: s.ParentUUID, ReceivedUUID: s.ReceivedUUID, ReadOnly: s.ReadOnly,
		Ctime: rfc3339(s.Ctime), Otime: rfc3339(s.Otime), Stime: rfc3339(s.Stime), Rtime: rfc3339(s.Rtime)}
}

func newSubvolumeCreateCommand() *cobra.Command {
	var devices []string
	cmd := &cobra.Command{
		Use:   "create IMAGE:PATH...",
		Short: "Create subvolumes",
		Long: `Create an empty subvolume at each PATH, as btrfs subvolume create does, and
print "Create subvolume 'IMAGE:PATH'" for each. All PATHs must be in the same
image; they are made in one transaction (none on any error).`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withWritable(cmd, args[0], devices, func(fsys *btrfs.FS, image string) error {
				for _, a := range args {
					img, p := splitImagePath(a)
					if img == a {
						return usagef("%s: name the path as IMAGE:PATH", a)
					}
					if img != image {
						return usagef("%s: every path must be in the same image (%s)", a, image)
					}
					if p == "." {
						return &fs.PathError{Op: "create", Path: a, Err: fs.ErrExist}
					}
					if _, err := fsys.CreateSubvolume(p, nil); err != nil {
						return err
					}
					fmt.Fprintf(cmd.OutOrStdout(), "Create subvolume '%s'\n", a)
				}
				return nil
			})
		},
	}
	cmd.Flags().StringArrayVar(&devices, "device", nil, "another device of a multi-device filesystem (repeatable)")
	return cmd
}

// withWritable opens the image that arg (IMAGE or IMAGE:PATH) names for
// writing, runs fn, and commits when fn succeeds (drops its changes
// otherwise).
func withWritable(cmd *cobra.Command, arg string, devices []string, fn func(fsys *btrfs.FS, image string) error) error {
	image, _ := splitImagePath(arg)
	fsys, err := openImage(image, &btrfs.Options{Devices: devices}, true, warner(cmd))
	if err != nil {
		return err
	}
	if err := fn(fsys, image); err != nil {
		return errors.Join(err, fsys.Rollback(), fsys.Close())
	}
	return errors.Join(fsys.Commit(), fsys.Close())
}

func newSubvolumeShowCommand() *cobra.Command {
	var (
		ff    fsFlags
		jsonF bool
	)
	cmd := &cobra.Command{
		Use:   "show IMAGE[:PATH]",
		Short: "Show a subvolume",
		Long: `Print what btrfs subvolume show prints for the subvolume whose top directory
is PATH (the top level without PATH): its path from the top level ("/" for
the top level), name, UUIDs, times in the local time zone, ids, generations,
flags and snapshots. Quota groups are not shown. With --json, an object with
the same fields in snake_case.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			image, p := splitImagePath(args[0])
			fsys, err := ff.open(image, warner(cmd))
			if err != nil {
				return err
			}
			defer fsys.Close()
			id, err := fsys.SubvolumeAt(p)
			if err != nil {
				return notSubvolume(args[0], err)
			}
			info, err := fsys.SubvolumeInfoOf(id)
			if err != nil {
				return err
			}
			snaps, err := snapshotsOf(fsys, info)
			if err != nil {
				return err
			}
			if jsonF {
				j := subvolToJSON(*info)
				j.Snapshots = snaps
				return writeJSON(cmd.OutOrStdout(), j)
			}
			printSubvolShow(cmd.OutOrStdout(), info, snaps)
			return nil
		},
	}
	ff.register(cmd)
	cmd.Flags().BoolVar(&jsonF, "json", false, "print a JSON object")
	return cmd
}

// notSubvolume words SubvolumeAt's refusal as progs does.
func notSubvolume(arg string, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return fmt.Errorf("not a subvolume: %s", arg)
}

// snapshotsOf lists the paths of the subvolumes made as snapshots of
// info (their parent UUID is its UUID), in id order.
func snapshotsOf(fsys *btrfs.FS, info *btrfs.SubvolumeInfo) ([]string, error) {
	if info.UUID == zeroUUID {
		return nil, nil
	}
	subs, err := fsys.Subvolumes()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, s := range subs {
		if s.ParentUUID == info.UUID {
			out = append(out, s.Path)
		}
	}
	return out, nil
}

// progsTime formats t as btrfs-progs prints subvolume times: local time,
// "-" when never set.
func progsTime(t time.Time) string {
	if t.Unix() == 0 {
		return "-"
	}
	return t.Local().Format("2006-01-02 15:04:05 -0700")
}

func printSubvolShow(w io.Writer, s *btrfs.SubvolumeInfo, snaps []string) {
	var b strings.Builder
	path, name := s.Path, s.Path
	if s.ID == 5 {
		path, name = "/", "<FS_TREE>"
	} else if i := strings.LastIndexByte(s.Path, '/'); i >= 0 {
		name = s.Path[i+1:]
	}
	dash := func(u string) string {
		if u == zeroUUID {
			return "-"
		}
		return u
	}
	created := progsTime(s.Otime)
	// progs 6.2 prints the send time only when one is set, and otherwise
	// repeats the last time it formatted: the creation time.
	sent := created
	if s.Stime.Unix() != 0 {
		sent = progsTime(s.Stime)
	}
	flags := "-"
	if s.ReadOnly {
		flags = "readonly"
	}
	fmt.Fprintf(&b, "%s\n", path)
	fmt.Fprintf(&b, "\tName: \t\t\t%s\n", name)
	fmt.Fprintf(&b, "\tUUID: \t\t\t%s\n", dash(s.UUID))
	fmt.Fprintf(&b, "\tParent UUID: \t\t%s\n", dash(s.ParentUUID))
	fmt.Fprintf(&b, "\tReceived UUID: \t\t%s\n", dash(s.ReceivedUUID))
	fmt.Fprintf(&b, "\tCreation time: \t\t%s\n", created)
	fmt.Fprintf(&b, "\tSubvolume ID: \t\t%d\n", s.ID)
	fmt.Fprintf(&b, "\tGeneration: \t\t%d\n", s.Generation)
	fmt.Fprintf(&b, "\tGen at creation: \t%d\n", s.OTransID)
	fmt.Fprintf(&b, "\tParent ID: \t\t%d\n", s.ParentID)
	fmt.Fprintf(&b, "\tTop level ID: \t\t%d\n", s.ParentID)
	fmt.Fprintf(&b, "\tFlags: \t\t\t%s\n", flags)
	fmt.Fprintf(&b, "\tSend transid: \t\t%d\n", s.STransID)
	fmt.Fprintf(&b, "\tSend time: \t\t%s\n", sent)
	fmt.Fprintf(&b, "\tReceive transid: \t%d\n", s.RTransID)
	fmt.Fprintf(&b, "\tReceive time: \t\t%s\n", progsTime(s.Rtime))
	b.WriteString("\tSnapshot(s):\n")
	for _, p := range snaps {
		fmt.Fprintf(&b, "\t\t\t\t%s\n", p)
	}
	io.WriteString(w, b.String())
}

func newSubvolumeGetDefaultCommand() *cobra.Command {
	var (
		ff    fsFlags
		jsonF bool
	)
	cmd := &cobra.Command{
		Use:   "get-default IMAGE",
		Short: "Print the default subvolume",
		Long: `Print the subvolume the kernel mounts when no subvol option is given, as btrfs
subvolume get-default does: "ID 5 (FS_TREE)" for the top level, else the
subvolume's line of subvolume list. With --json, {"id": N, "path": P}.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			fsys, err := ff.open(args[0], warner(cmd))
			if err != nil {
				return err
			}
			defer fsys.Close()
			id, err := fsys.DefaultSubvolume()
			if err != nil {
				return err
			}
			info, err := fsys.SubvolumeInfoOf(id)
			if err != nil {
				return err
			}
			if jsonF {
				return writeJSON(cmd.OutOrStdout(), struct {
					ID   uint64 `json:"id"`
					Path string `json:"path"`
				}{id, info.Path})
			}
			if id == 5 {
				fmt.Fprintln(cmd.OutOrStdout(), "ID 5 (FS_TREE)")
				return nil
			}
			printSubvol(cmd.OutOrStdout(), *info, false, false, false, false, false)
			return nil
		},
	}
	ff.register(cmd)
	cmd.Flags().BoolVar(&jsonF, "json", false, "print a JSON object")
	return cmd
}

func newSubvolumeSetDefaultCommand() *cobra.Command {
	var devices []string
	cmd := &cobra.Command{
		Use:   "set-default {ID IMAGE | IMAGE:PATH}",
		Short: "Set the default subvolume",
		Long: `Make a subvolume the one the kernel mounts when no subvol option is given, as
btrfs subvolume set-default does: by id (5 for the top level) and image, or
by the path of its top directory. Prints nothing.`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			target := args[0]
			if len(args) == 2 {
				target = args[1]
			}
			return withWritable(cmd, target, devices, func(fsys *btrfs.FS, image string) error {
				var id uint64
				if len(args) == 2 {
					v, err := strconv.ParseUint(args[0], 10, 64)
					if err != nil {
						return usagef("invalid subvolume id %q", args[0])
					}
					id = v
				} else {
					img, p := splitImagePath(args[0])
					if img == args[0] {
						return usagef("%s: name the subvolume as ID IMAGE or IMAGE:PATH", args[0])
					}
					v, err := fsys.SubvolumeAt(p)
					if err != nil {
						return notSubvolume(args[0], err)
					}
					id = v
				}
				return fsys.SetDefaultSubvolume(id)
			})
		},
	}
	cmd.Flags().StringArrayVar(&devices, "device", nil, "another device of a multi-device filesystem (repeatable)")
	return cmd
}
