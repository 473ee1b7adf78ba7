package cli

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gobtrfs/btrfs"
)

type lsCmd struct {
	devices   []string
	long      bool
	recursive bool
	all       bool // -a: also ".", ".." and names starting with "."
	almostAll bool // -A: names starting with "." but not "." and ".."
	inode     bool
	size      bool
	human     bool
	dirItself bool
	fullTime  bool

	now      time.Time
	fss      map[string]*btrfs.FS // open images by name
	oneImage bool                 // every operand names the same image
	printed  bool                 // something is on the output already
	warn     func(string)         // warnings of opening an image
}

func newLsCommand() *cobra.Command {
	c := &lsCmd{}
	var one, numeric bool
	cmd := &cobra.Command{
		Use:   "ls [-lRaA1isdh] IMAGE[:PATH]...",
		Short: "List directories inside filesystem images",
		Long: `List the entries of each PATH (default: the top of the filesystem) sorted by
name, like ls(1) writing to a pipe (one name a line). Owners print as numbers
(like ls -n): the image has no passwd file of the host's. Times are shown in
the local time zone. Subvolumes and snapshots show as directories where they
sit.

Files named as operands are listed first, then each directory under a
"PATH:" header when there are several operands or -R. Headers name the path
inside the image, with IMAGE: before it when the operands name several
images.

-s shows the space a file takes in 1 KiB blocks (with -h, in units), as ls
-s does on a mounted btrfs. -d is --directory, as in ls: other devices of a
multi-device filesystem are given with --device only, and -h is
--human-readable (--help shows this help).`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c.warn = warner(cmd)
			return c.run(cmd.OutOrStdout(), args)
		},
	}
	// Only --help: -h is --human-readable, as in ls(1).
	cmd.Flags().Bool("help", false, "help for ls")
	cmd.Flags().StringArrayVar(&c.devices, "device", nil, "another device of a multi-device filesystem (repeatable)")
	cmd.Flags().BoolVarP(&c.long, "long", "l", false, "long listing: mode, links, owner, group, size, mtime")
	cmd.Flags().BoolVarP(&c.recursive, "recursive", "R", false, "list subdirectories recursively")
	cmd.Flags().BoolVarP(&c.all, "all", "a", false, "include entries starting with ., and . and ..")
	cmd.Flags().BoolVarP(&c.almostAll, "almost-all", "A", false, "include entries starting with ., but not . and ..")
	cmd.Flags().BoolVarP(&one, "one", "1", false, "one entry a line (always the case)")
	cmd.Flags().BoolVarP(&c.inode, "inode", "i", false, "print each file's inode number")
	cmd.Flags().BoolVarP(&c.size, "size", "s", false, "print the allocated size of each file, in 1 KiB blocks")
	cmd.Flags().BoolVarP(&c.human, "human-readable", "h", false, "with -l and -s, print sizes like 1.0K 234M 2.0G")
	cmd.Flags().BoolVarP(&c.dirItself, "directory", "d", false, "list directories themselves, not their contents")
	cmd.Flags().BoolVarP(&numeric, "numeric-uid-gid", "n", false, "like -l (owners are always numbers)")
	cmd.Flags().BoolVar(&c.fullTime, "full-time", false, "like -l with times as 2006-01-02 15:04:05.999999999 -0700")
	cmd.PreRun = func(*cobra.Command, []string) {
		c.long = c.long || numeric || c.fullTime
	}
	return cmd
}

// lsOperand is one command line operand, resolved.
type lsOperand struct {
	arg, image, path string
	fsys             *btrfs.FS
	fi               fs.FileInfo // lstat, or stat for a followed symlink
}

// lsRow is one line of a listing.
type lsRow struct {
	name string
	fi   fs.FileInfo
	link string // a symlink's target, shown with -l
	fsys *btrfs.FS
}

func (c *lsCmd) run(w io.Writer, args []string) error {
	c.now = time.Now()
	c.fss = map[string]*btrfs.FS{}
	defer func() {
		for _, f := range c.fss {
			f.Close()
		}
	}()
	var errs []error
	var files, dirs []lsOperand
	c.oneImage = true
	first := ""
	for i, a := range args {
		image, _ := splitImagePath(a)
		if i == 0 {
			first = image
		} else if filepath.Clean(image) != filepath.Clean(first) {
			c.oneImage = false
		}
	}
	for _, a := range args {
		op, err := c.resolve(a)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if op.fi.IsDir() && !c.dirItself {
			dirs = append(dirs, op)
		} else {
			files = append(files, op)
		}
	}
	sort.SliceStable(files, func(i, j int) bool { return files[i].arg < files[j].arg })
	sort.SliceStable(dirs, func(i, j int) bool { return dirs[i].arg < dirs[j].arg })
	if len(files) > 0 {
		rows := make([]lsRow, len(files))
		for i, op := range files {
			rows[i] = c.row(op.fsys, op.path, c.header(op.image, op.path), op.fi)
		}
		if err := c.print(w, rows, false); err != nil {
			return err
		}
	}
	headers := len(args) > 1 || c.recursive
	for _, op := range dirs {
		if err := c.listDir(w, op.fsys, op.image, op.path, headers); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// resolve opens the operand's image (once per image) and looks its path
// up: a symbolic link is followed, as ls does for operands, unless -l or
// -d asks about the link itself.
func (c *lsCmd) resolve(arg string) (lsOperand, error) {
	image, p := splitImagePath(arg)
	op := lsOperand{arg: arg, image: image, path: p}
	fsys := c.fss[filepath.Clean(image)]
	if fsys == nil {
		var err error
		if fsys, err = openImage(image, &btrfs.Options{Devices: c.devices}, false, c.warn); err != nil {
			return op, err
		}
		c.fss[filepath.Clean(image)] = fsys
	}
	op.fsys = fsys
	fi, err := fsys.Lstat(p)
	if err != nil {
		return op, operandErr(arg, err)
	}
	if fi.Mode()&fs.ModeSymlink != 0 && !c.long && !c.dirItself {
		if sfi, err := fsys.Stat(p); err == nil {
			fi = sfi
		}
	}
	op.fi = fi
	return op, nil
}

// header names the directory p of image in headers and file operands:
// the path inside the image, with the image first when operands name
// several images.
func (c *lsCmd) header(image, p string) string {
	if c.oneImage {
		return displayPath(p)
	}
	return image + ":" + displayPath(p)
}

func (c *lsCmd) row(fsys *btrfs.FS, p, name string, fi fs.FileInfo) lsRow {
	r := lsRow{name: name, fi: fi, fsys: fsys}
	if c.long && fi.Mode()&fs.ModeSymlink != 0 {
		if t, err := fsys.ReadLink(p); err == nil {
			r.link = t
		}
	}
	return r
}

func (c *lsCmd) listDir(w io.Writer, fsys *btrfs.FS, image, dir string, header bool) error {
	if c.printed {
		fmt.Fprintln(w)
	}
	if header {
		fmt.Fprintf(w, "%s:\n", c.header(image, dir))
		c.printed = true
	}
	ents, err := fsys.ReadDir(dir)
	if err != nil {
		return err
	}
	var subdirs []string
	var errs []error
	rows := make([]lsRow, 0, len(ents)+2)
	if c.all {
		// ".." of the top is the top itself, as at the root of a
		// filesystem: what is above the image is not in it.
		for _, d := range []struct{ name, p string }{{".", dir}, {"..", path.Dir(dir)}} {
			fi, err := fsys.Lstat(d.p)
			if err != nil {
				return err
			}
			rows = append(rows, c.row(fsys, d.p, d.name, fi))
		}
	}
	for _, e := range ents {
		if !c.all && !c.almostAll && strings.HasPrefix(e.Name(), ".") {
			continue
		}
		p := path.Join(dir, e.Name())
		fi, err := e.Info()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		rows = append(rows, c.row(fsys, p, e.Name(), fi))
		if e.IsDir() {
			subdirs = append(subdirs, p)
		}
	}
	if err := c.print(w, rows, true); err != nil {
		return err
	}
	if c.recursive {
		for _, d := range subdirs {
			if err := c.listDir(w, fsys, image, d, true); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// print writes rows with their columns aligned over the listing, as ls
// does, after a "total" line (blocks of everything listed) when the
// listing is a directory's and -l or -s is given.
func (c *lsCmd) print(w io.Writer, rows []lsRow, isDir bool) error {
	cols := make([][]string, len(rows))
	var total int64
	for i, r := range rows {
		cols[i] = c.columns(r)
		total += allocated(r)
	}
	if isDir && (c.long || c.size) {
		fmt.Fprintf(w, "total %s\n", c.blocks(total))
	}
	// Which columns are right-aligned: every number; the mode and the
	// time are of one width anyway.
	widths := map[int]int{}
	for _, row := range cols {
		for j, s := range row[:len(row)-1] {
			widths[j] = max(widths[j], len(s))
		}
	}
	var b strings.Builder
	for _, row := range cols {
		b.Reset()
		for j, s := range row[:len(row)-1] {
			fmt.Fprintf(&b, "%*s ", widths[j], s)
		}
		b.WriteString(row[len(row)-1])
		b.WriteByte('\n')
		if _, err := io.WriteString(w, b.String()); err != nil {
			return err
		}
	}
	c.printed = c.printed || len(rows) > 0 || isDir
	return nil
}

// columns are the fields of one row, the name (and link target) last.
func (c *lsCmd) columns(r lsRow) []string {
	st, _ := r.fi.Sys().(*btrfs.Stat)
	if st == nil {
		st = &btrfs.Stat{}
	}
	var out []string
	if c.inode {
		out = append(out, strconv.FormatUint(st.Ino, 10))
	}
	if c.size {
		out = append(out, c.blocks(allocated(r)))
	}
	if c.long {
		size := c.bytes(r.fi.Size())
		if r.fi.Mode()&fs.ModeDevice != 0 {
			size = fmt.Sprintf("%d, %d", st.RdevMajor, st.RdevMinor)
		}
		out = append(out, modeString(st.Mode), strconv.FormatUint(uint64(st.Nlink), 10),
			strconv.FormatUint(uint64(st.UID), 10), strconv.FormatUint(uint64(st.GID), 10),
			size, c.timeString(r.fi.ModTime()))
	}
	name := r.name
	if r.link != "" {
		name += " -> " + r.link
	}
	return append(out, name)
}

// allocated is what ls -s counts for a file: the bytes of its extents
// rounded up to whole sectors, as the kernel's st_blocks for btrfs.
func allocated(r lsRow) int64 {
	st, ok := r.fi.Sys().(*btrfs.Stat)
	if !ok {
		return 0
	}
	sector := uint64(r.fsys.SectorSize())
	return int64((st.NBytes + sector - 1) / sector * sector)
}

// blocks renders an allocated size as ls -s does: 1 KiB blocks rounded
// up, or with -h in units.
func (c *lsCmd) blocks(n int64) string {
	if c.human {
		return humanSize(n)
	}
	return strconv.FormatInt((n+1023)/1024, 10)
}

// bytes renders a file size for -l.
func (c *lsCmd) bytes(n int64) string {
	if c.human {
		return humanSize(n)
	}
	return strconv.FormatInt(n, 10)
}

// humanSize renders n bytes as ls -h does: plain below 1024, otherwise in
// K, M, G, ... (powers of 1024), rounded up, with one decimal below 10.
func humanSize(n int64) string {
	if n < 1024 {
		return strconv.FormatInt(n, 10)
	}
	const units = "KMGTPE"
	v := float64(n)
	for u := 0; u < len(units); u++ {
		v /= 1024
		if v < 10 {
			// Round up to a tenth; 9.96 becomes 10, printed without a
			// decimal as ls does.
			t := ceilTenth(v)
			if t < 10 {
				return strconv.FormatFloat(t, 'f', 1, 64) + units[u:u+1]
			}
			v = t
		}
		if r := ceil(v); r < 1024 {
			return strconv.FormatInt(int64(r), 10) + units[u:u+1]
		}
	}
	return strconv.FormatInt(n, 10)
}

func ceilTenth(v float64) float64 {
	t := float64(int64(v * 10))
	if t < v*10 {
		t++
	}
	return t / 10
}

func ceil(v float64) float64 {
	r := float64(int64(v))
	if r < v {
		r++
	}
	return r
}

// sixMonths is the age past which ls -l shows a year instead of the time
// of day (half of an average Gregorian year, as coreutils).
const sixMonths = 31556952 / 2 * time.Second

// timeString renders a modification time as ls -l does in the C locale,
// in the local time zone: "Jan  2 15:04" within the last six months,
// "Jan  2  2006" otherwise; with --full-time to the nanosecond.
func (c *lsCmd) timeString(t time.Time) string {
	t = t.Local()
	switch {
	case c.fullTime:
		return t.Format("2006-01-02 15:04:05.000000000 -0700")
	case t.After(c.now.Add(-sixMonths)) && !t.After(c.now):
		return t.Format("Jan _2 15:04")
	default:
		return t.Format("Jan _2  2006")
	}
}

func displayPath(p string) string {
	if p == "." {
		return "/"
	}
	return "/" + p
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
