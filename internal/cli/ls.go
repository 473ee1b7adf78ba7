package cli

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gobtrfs/btrfs"
)

type lsCmd struct {
	ff        fsFlags
	long      bool
	recursive bool
	all       bool
}

func newLsCommand() *cobra.Command {
	c := &lsCmd{}
	cmd := &cobra.Command{
		Use:   "ls [-l] [-R] [-a] IMAGE[:PATH]",
		Short: "List a directory inside a filesystem image",
		Long: `List the entries of PATH (default: the top of the filesystem) sorted by name,
like ls. Owners print as numbers (like ls -n): the image has no passwd file of
the host's. Subvolumes and snapshots show as directories where they sit.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return c.run(cmd.OutOrStdout(), args[0]) },
	}
	c.ff.register(cmd)
	cmd.Flags().BoolVarP(&c.long, "long", "l", false, "long listing: mode, links, owner, group, size, mtime")
	cmd.Flags().BoolVarP(&c.recursive, "recursive", "R", false, "list subdirectories recursively")
	cmd.Flags().BoolVarP(&c.all, "all", "a", false, "include entries starting with .")
	return cmd
}

func (c *lsCmd) run(w io.Writer, arg string) error {
	image, p := splitImagePath(arg)
	fsys, err := c.ff.open(image)
	if err != nil {
		return err
	}
	defer fsys.Close()
	fi, err := fsys.Stat(p)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		li, err := fsys.Lstat(p)
		if err != nil {
			return err
		}
		return c.printEntry(w, fsys, p, li)
	}
	return c.listDir(w, fsys, p, c.recursive)
}

func (c *lsCmd) listDir(w io.Writer, fsys *btrfs.FS, dir string, header bool) error {
	if header {
		fmt.Fprintf(w, "%s:\n", displayPath(dir))
	}
	ents, err := fsys.ReadDir(dir)
	if err != nil {
		return err
	}
	var subdirs []string
	var errs []error
	for _, e := range ents {
		if !c.all && strings.HasPrefix(e.Name(), ".") {
			continue
		}
		p := path.Join(dir, e.Name())
		fi, err := e.Info()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if err := c.printEntry(w, fsys, p, fi); err != nil {
			errs = append(errs, err)
		}
		if e.IsDir() {
			subdirs = append(subdirs, p)
		}
	}
	if c.recursive {
		for _, d := range subdirs {
			fmt.Fprintln(w)
			if err := c.listDir(w, fsys, d, true); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

func displayPath(p string) string {
	if p == "." {
		return "/"
	}
	return "/" + p
}

func (c *lsCmd) printEntry(w io.Writer, fsys *btrfs.FS, p string, fi fs.FileInfo) error {
	if !c.long {
		_, err := fmt.Fprintln(w, fi.Name())
		return err
	}
	st := fi.Sys().(*btrfs.Stat)
	size := fmt.Sprint(fi.Size())
	if fi.Mode()&fs.ModeDevice != 0 {
		size = fmt.Sprintf("%d, %d", st.RdevMajor, st.RdevMinor)
	}
	name := fi.Name()
	if fi.Mode()&fs.ModeSymlink != 0 {
		if t, err := fsys.ReadLink(p); err == nil {
			name += " -> " + t
		}
	}
	_, err := fmt.Fprintf(w, "%s %3d %5d %5d %10s %s %s\n", modeString(st.Mode), st.Nlink, st.UID, st.GID,
		size, fi.ModTime().Format(time.DateTime), name)
	return err
}

// modeString renders a Linux st_mode the way ls -l does.
func modeString(m uint32) string {
	b := []byte("?rwxrwxrwx")
	switch m & 0o170000 {
	case 0o100000:
		b[0] = '-'
	case 0o040000:
		b[0] = 'd'
	case 0o120000:
		b[0] = 'l'
	case 0o020000:
		b[0] = 'c'
	case 0o060000:
		b[0] = 'b'
	case 0o010000:
		b[0] = 'p'
	case 0o140000:
		b[0] = 's'
	}
	for i := 0; i < 9; i++ {
		if m&(1<<(8-i)) == 0 {
			b[i+1] = '-'
		}
	}
	special := func(i int, bit uint32, set, unset byte) {
		if m&bit != 0 {
			if b[i] == '-' {
				b[i] = unset
			} else {
				b[i] = set
			}
		}
	}
	special(3, 0o4000, 's', 'S')
	special(6, 0o2000, 's', 'S')
	special(9, 0o1000, 't', 'T')
	return string(b)
}
