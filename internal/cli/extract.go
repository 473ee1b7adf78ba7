package cli

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/spf13/cobra"

	"github.com/gobtrfs/btrfs/internal/extract"
)

func newExtractCommand() *cobra.Command {
	var (
		ff        fsFlags
		quiet     bool
		noOwners  bool
		noXattrs  bool
		overwrite bool
		workers   int
	)
	cmd := &cobra.Command{
		Use:   "extract [-d DEVICE]... IMAGE[:PATH] DESTDIR",
		Short: "Copy a tree out of a filesystem image",
		Long: `Recreate PATH (default: the whole filesystem) under DESTDIR: file contents with
holes kept as holes, modes, owners (when run as root), nanosecond times,
extended attributes, symlinks, hardlinks, device nodes, fifos and sockets.
Subvolumes and snapshots become directories where they sit.

PATH may be a single file, which goes into DESTDIR under its name. DESTDIR
may exist: directories in it are merged into; an existing file in the way is
a failure naming it, unless --overwrite replaces it (a directory in the way
of a file stays a failure).

Damage is reported and skipped: extract goes on with everything it can read
and exits with status 1 at the end, naming each path it could not extract
(the destination path for what could not be written, IMAGE:/PATH for what
could not be read).`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			image, p := splitImagePath(args[0])
			fsys, err := ff.open(image, warner(cmd))
			if err != nil {
				return err
			}
			defer fsys.Close()
			bar := newProgress(cmd.ErrOrStderr(), quiet, "extract", 0)
			_, err = extract.Run(cmd.Context(), fsys, p, args[1], extract.Options{
				Workers: workers, NoOwners: noOwners, NoXattrs: noXattrs, Overwrite: overwrite, Progress: bar.add,
				Warn: func(p string, err error) {
					fmt.Fprintf(cmd.ErrOrStderr(), "gobtrfs extract: %s:%s: skipped: %v\n", image, displayPath(p), err)
				}})
			bar.finish()
			return extractFailures(image, err)
		},
	}
	ff.register(cmd)
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "no progress display")
	cmd.Flags().BoolVar(&noOwners, "no-owners", false, "do not set owners, even as root")
	cmd.Flags().BoolVar(&noXattrs, "no-xattrs", false, "do not copy extended attributes")
	cmd.Flags().BoolVar(&overwrite, "overwrite", false, "replace existing files in DESTDIR")
	cmd.Flags().IntVarP(&workers, "jobs", "j", 0, "files copied in parallel (default: number of CPUs)")
	return cmd
}

// extractFailures turns the failures of an extract run into one message
// each: a file that could not be written names its destination (with a
// hint when something was in the way), one that could not be read names
// IMAGE:/PATH.
func extractFailures(image string, err error) error {
	var xe *extract.Error
	if !errors.As(err, &xe) {
		return err
	}
	var out []error
	for _, f := range xe.Failures {
		var pe *fs.PathError
		if errors.As(f.Err, &pe) && pe.Path == f.Dest {
			msg := f.Dest + ": " + reason(f.Dest, pe.Err)
			if errors.Is(f.Err, fs.ErrExist) {
				msg += " (--overwrite replaces it)"
			}
			out = append(out, hostErr(errors.New(msg)))
			continue
		}
		src := image + ":" + displayPath(f.Path)
		inner := f.Err
		if errors.As(f.Err, &pe) {
			inner = pe.Err
		}
		out = append(out, hostErr(errors.New(src+": "+reason(src, inner))))
	}
	return errors.Join(out...)
}
