package cli

import (
	"fmt"
	"io/fs"
	"path"

	"github.com/spf13/cobra"

	"github.com/gobtrfs/btrfs"
)

func newSubvolumeSnapshotCommand() *cobra.Command {
	var (
		devices  []string
		readOnly bool
	)
	cmd := &cobra.Command{
		Use:   "snapshot [-r] IMAGE:SOURCE IMAGE:DEST",
		Short: "Create a snapshot of a subvolume",
		Long: `Create a snapshot of the subvolume whose top directory is SOURCE (the top
level without a path), as btrfs subvolume snapshot does: at DEST, or inside
DEST with SOURCE's name when DEST is an existing directory. With -r the
snapshot is read-only. It prints "Create a snapshot of 'SOURCE' in 'DEST'"
(or "a readonly snapshot") as btrfs-progs does.

The snapshot shares the source's tree (one block is written, whatever its
size). gobtrfs does not yet write into a subvolume whose tree it shares
with a snapshot (unless its tree is one leaf), nor make a snapshot inside
the subvolume it copies: such changes are refused before anything is
written (exit 1); the kernel writes them as usual.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withWritable(cmd, args[0], devices, func(fsys *btrfs.FS, image string) error {
				_, src := splitImagePath(args[0])
				img, dst := splitImagePath(args[1])
				if img == args[1] || img != image {
					return usagef("%s: name the destination as IMAGE:PATH in %s", args[1], image)
				}
				shown := args[1]
				if dst == "." {
					dst = ""
				}
				if fi, err := fsys.Stat(pathOrDot(dst)); err == nil && fi.IsDir() {
					base := path.Base(src)
					if src == "." {
						return &fs.PathError{Op: "snapshot", Path: args[1], Err: fs.ErrExist}
					}
					dst = path.Join(dst, base)
					shown = image + ":" + "/" + dst
				}
				if _, err := fsys.Snapshot(src, dst, &btrfs.SnapshotOptions{ReadOnly: readOnly}); err != nil {
					return err
				}
				kind := "a snapshot"
				if readOnly {
					kind = "a readonly snapshot"
				}
				fmt.Fprintf(cmd.OutOrStdout(), "Create %s of '%s' in '%s'\n", kind, args[0], shown)
				return nil
			})
		},
	}
	cmd.Flags().BoolVarP(&readOnly, "readonly", "r", false, "make the snapshot read-only")
	cmd.Flags().StringArrayVar(&devices, "device", nil, "another device of a multi-device filesystem (repeatable)")
	return cmd
}

// pathOrDot is p, or "." for the top.
func pathOrDot(p string) string {
	if p == "" {
		return "."
	}
	return p
}
