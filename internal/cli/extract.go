package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gobtrfs/btrfs/internal/extract"
)

func newExtractCommand() *cobra.Command {
	var (
		ff       fsFlags
		quiet    bool
		noOwners bool
		noXattrs bool
		workers  int
	)
	cmd := &cobra.Command{
		Use:   "extract [-d DEVICE]... IMAGE[:PATH] DESTDIR",
		Short: "Copy a tree out of a filesystem image",
		Long: `Recreate PATH (default: the whole filesystem) under DESTDIR: file contents with
holes kept as holes, modes, owners (when run as root), nanosecond times,
extended attributes, symlinks, hardlinks, device nodes, fifos and sockets.
Subvolumes and snapshots become directories where they sit.

Damage is reported and skipped: extract goes on with everything it can read
and exits with status 1 at the end, naming each path it could not extract.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			image, p := splitImagePath(args[0])
			fsys, err := ff.open(image)
			if err != nil {
				return err
			}
			defer fsys.Close()
			bar := newProgress(cmd.ErrOrStderr(), quiet, "extract", 0)
			_, err = extract.Run(cmd.Context(), fsys, p, args[1], extract.Options{
				Workers: workers, NoOwners: noOwners, NoXattrs: noXattrs, Progress: bar.add,
				Warn: func(p string, err error) {
					fmt.Fprintf(cmd.ErrOrStderr(), "gobtrfs: extract: %s: skipped: %v\n", p, err)
				}})
			bar.finish()
			return err
		},
	}
	ff.register(cmd)
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "no progress display")
	cmd.Flags().BoolVar(&noOwners, "no-owners", false, "do not set owners, even as root")
	cmd.Flags().BoolVar(&noXattrs, "no-xattrs", false, "do not copy extended attributes")
	cmd.Flags().IntVarP(&workers, "jobs", "j", 0, "files copied in parallel (default: number of CPUs)")
	return cmd
}
