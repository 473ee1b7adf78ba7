package cli

import (
	"io"

	"github.com/spf13/cobra"
)

func newCatCommand() *cobra.Command {
	var ff fsFlags
	cmd := &cobra.Command{
		Use:   "cat IMAGE:PATH...",
		Short: "Print files from inside a filesystem image",
		Long: `Write the contents of each file to standard output, following symlinks.
Every data block is verified against its checksum as it is read.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, a := range args {
				image, p := splitImagePath(a)
				if p == "." {
					return usagef("%s: name a file as IMAGE:PATH", a)
				}
				if err := catOne(cmd.OutOrStdout(), &ff, image, p, warner(cmd)); err != nil {
					return err
				}
			}
			return nil
		},
	}
	ff.register(cmd)
	return cmd
}

func catOne(w io.Writer, ff *fsFlags, image, p string, warn func(string)) error {
	fsys, err := ff.open(image, warn)
	if err != nil {
		return err
	}
	defer fsys.Close()
	f, err := fsys.OpenFile(p)
	if err != nil {
		return operandErr(image+":"+displayPath(p), err)
	}
	defer f.Close()
	if _, err = io.Copy(w, f); err != nil {
		return operandErr(image+":"+displayPath(p), err)
	}
	return nil
}
