package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gobtrfs/btrfs"
)

func newSubvolumeDeleteCommand() *cobra.Command {
	var (
		devices                []string
		subvolID               uint64
		commitAfter, commitEac bool
		deferDrop              bool
	)
	cmd := &cobra.Command{
		Use:   "delete [-c|-C] IMAGE:PATH... | delete -i ID IMAGE",
		Short: "Delete subvolumes and snapshots",
		Long: `Delete each subvolume or snapshot whose top directory is PATH (or the one
with id ID), as btrfs subvolume delete followed by the kernel's cleaner:
its name goes and its tree is dropped in the same commit (blocks and data
only it references are freed; blocks shared with a snapshot lose its
reference, and those it owns name their children by address from then
on, so its snapshots outlive it). It prints "Delete subvolume (commit): 'IMAGE:PATH'" for each:
gobtrfs always commits before it exits (-c and -C are accepted). All PATHs
must be in one image; they go in one transaction (none on any error).

With --defer-drop the tree is left for a cleaner, as the kernel's own
deletion leaves it: the name, refs and UUID entries go, the tree stays
with refs 0 and an orphan item, and the kernel's cleaner drops it at the
next read-write mount (gobtrfs's next writable open does too). The
command then costs the same whatever the subvolume's size.

Refused as by the kernel: the default subvolume, one holding other
subvolumes, a path that is not a subvolume (exit 1, nothing written).`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts := &btrfs.DeleteSubvolumeOptions{DeferDrop: deferDrop}
			return withWritable(cmd, args[0], devices, func(fsys *btrfs.FS, image string) error {
				if cmd.Flags().Changed("subvolid") {
					if len(args) != 1 {
						return usagef("with -i, name only the image")
					}
					img, _ := splitImagePath(args[0])
					p, err := subvolPathOf(fsys, subvolID)
					if err != nil {
						return err
					}
					if err := fsys.DeleteSubvolumeWith(p, opts); err != nil {
						return err
					}
					fmt.Fprintf(cmd.OutOrStdout(), "Delete subvolume (commit): '%s:/%s'\n", img, p)
					return nil
				}
				for _, a := range args {
					img, p := splitImagePath(a)
					if img == a {
						return usagef("%s: name the subvolume as IMAGE:PATH", a)
					}
					if img != image {
						return usagef("%s: every path must be in the same image (%s)", a, image)
					}
					if err := fsys.DeleteSubvolumeWith(p, opts); err != nil {
						return err
					}
					fmt.Fprintf(cmd.OutOrStdout(), "Delete subvolume (commit): '%s'\n", a)
				}
				return nil
			})
		},
	}
	f := cmd.Flags()
	f.Uint64VarP(&subvolID, "subvolid", "i", 0, "delete the subvolume with this id (name only the image)")
	f.BoolVar(&deferDrop, "defer-drop", false, "leave the tree for the kernel's cleaner (or the next writable open), as the kernel's deletion does")
	f.BoolVarP(&commitAfter, "commit-after", "c", false, "accepted: gobtrfs always commits before it exits")
	f.BoolVarP(&commitEac, "commit-each", "C", false, "accepted: gobtrfs always commits before it exits")
	f.StringArrayVar(&devices, "device", nil, "another device of a multi-device filesystem (repeatable)")
	return cmd
}

// subvolPathOf is the path of subvolume id from the top level.
func subvolPathOf(fsys *btrfs.FS, id uint64) (string, error) {
	subs, err := fsys.Subvolumes()
	if err != nil {
		return "", err
	}
	for _, s := range subs {
		if s.ID == id {
			return s.Path, nil
		}
	}
	return "", usagef("no subvolume with id %d", id)
}
