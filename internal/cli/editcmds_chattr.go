package cli

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"syscall"

	"github.com/gobtrfs/btrfs"
)

// chattr and lsattr as e2fsprogs' tools behave on btrfs: the 22 attribute
// letters lsattr prints, of which btrfs keeps S D i a d A c C m (and V,
// read only).

// attrLetters are lsattr's columns in e2fsprogs' order, with the btrfs
// inode flag each stands for (0: btrfs has no such flag), and -l's name.
var attrLetters = []struct {
	letter byte
	flag   uint64
	long   string
}{
	{'s', 0, "Secure_Deletion"}, {'u', 0, "Undelete"}, {'S', btrfs.InodeSync, "Synchronous_Updates"},
	{'D', btrfs.InodeDirSync, "Synchronous_Directory_Updates"}, {'i', btrfs.InodeImmutable, "Immutable"},
	{'a', btrfs.InodeAppend, "Append_Only"}, {'d', btrfs.InodeNoDump, "No_Dump"}, {'A', btrfs.InodeNoAtime, "No_Atime"},
	{'c', btrfs.InodeCompress, "Compression_Requested"}, {'E', 0, "Encrypted"}, {'j', 0, "Journaled_Data"},
	{'I', 0, "Indexed_directory"}, {'t', 0, "No_Tailmerging"}, {'T', 0, "Top_of_Directory_Hierarchies"},
	{'e', 0, "Extents"}, {'C', btrfs.InodeNoDataCow, "No_COW"}, {'x', 0, "DAX"}, {'F', 0, "Casefold"},
	{'N', 0, "Inline_Data"}, {'P', 0, "Project_Hierarchy"}, {'V', inodeVerity, "Verity"},
	{'m', btrfs.InodeNoCompress, "Dont_Compress"},
}

// inodeVerity is the btrfs read-only flag of fs-verity files (a ro_flags
// bit, kept above the 32 flag bits in Stat.Flags).
const inodeVerity = 1 << 32

// unsupportedAttr stands for a letter btrfs has no flag for: the library
// refuses it as the kernel does (EOPNOTSUPP).
const unsupportedAttr = 1 << 62

// attrString is lsattr's 22-column view of flags.
func attrString(flags uint64) string {
	b := make([]byte, len(attrLetters))
	for i, l := range attrLetters {
		b[i] = '-'
		if l.flag != 0 && flags&l.flag != 0 {
			b[i] = l.letter
		}
	}
	return string(b)
}

// attrLong is lsattr -l's view: the names of the flags set, or "---".
func attrLong(flags uint64) string {
	var names []string
	for _, l := range attrLetters {
		if l.flag != 0 && flags&l.flag != 0 {
			names = append(names, l.long)
		}
	}
	if len(names) == 0 {
		return "---"
	}
	return strings.Join(names, ", ")
}

// attrMode is one chattr mode: +letters, -letters or =letters.
type attrMode struct {
	op    byte
	flags uint64
}

// isAttrMode reports whether s is a chattr mode (an operand even when it
// starts with "-", unless it is one of chattr's options -R -V -f).
func isAttrMode(s string) bool {
	_, err := parseAttrMode(s)
	return err == nil && s != "-R" && s != "-V" && s != "-f" && s != "-RV" && s != "-VR"
}

func parseAttrMode(s string) (attrMode, error) {
	if len(s) < 2 || !strings.ContainsRune("+-=", rune(s[0])) {
		return attrMode{}, usagef("bad mode %q (+, - or = and attribute letters)", s)
	}
	m := attrMode{op: s[0]}
	for i := 1; i < len(s); i++ {
		found := false
		for _, l := range attrLetters {
			if l.letter == s[i] {
				found = true
				if l.flag == 0 || l.flag == inodeVerity {
					m.flags |= unsupportedAttr
				} else {
					m.flags |= l.flag
				}
			}
		}
		if !found {
			return attrMode{}, usagef("bad attribute letter %q in %q", s[i], s)
		}
	}
	return m, nil
}

var chattrWord = word{
	name:     "chattr",
	synopsis: "[-R] [-V] {+|-|=}ATTRS... PATH...",
	short:    "Change file attributes",
	long: `Change the attribute flags of each file as chattr(1) does on btrfs: +ATTRS sets,
-ATTRS clears, =ATTRS sets exactly these. btrfs keeps C (no copy on write;
changes only while a file is empty), c (compress; also sets the compression
property to zlib, or the algorithm of --compress, as the kernel's compress
mount option does), m (do not compress), i (immutable), a (append only), d (no
dump), A (no atime), S (synchronous) and D (synchronous directory); other
letters are refused as btrfs refuses them. With -R, everything below a
directory changes too (symbolic links met on the way are left alone). -V
prints the new flags of each file.`,
	flags: []flagDef{
		{name: "R", short: 'R', help: "change directories and their contents recursively"},
		{name: "V", short: 'V', help: "print the flags set"},
	},
	dashOperand: isAttrMode,
	run:         runChattr,
}

func runChattr(s *session, a *wordArgs) error {
	var modes []attrMode
	ops := a.ops
	for len(ops) > 0 && len(ops[0]) > 0 && strings.ContainsRune("+-=", rune(ops[0][0])) {
		m, err := parseAttrMode(ops[0])
		if err != nil {
			return err
		}
		modes = append(modes, m)
		ops = ops[1:]
	}
	if len(modes) == 0 {
		return usagef("missing mode (+ATTRS, -ATTRS or =ATTRS)")
	}
	if len(ops) == 0 {
		return usagef("missing PATH")
	}
	paths, err := s.paths(ops)
	if err != nil {
		return err
	}
	for i, p := range paths {
		show := ops[i]
		if s.script {
			show = p
		}
		if !a.has("R") {
			q, err := followLinks(s.fsys, p)
			if err != nil {
				return err
			}
			if err := chattrOne(s, q, show, modes, a.has("V")); err != nil {
				return err
			}
			continue
		}
		err := walkTree(s.fsys, p, false, func(q string, fi fs.FileInfo) error {
			if fi.Mode()&fs.ModeSymlink != 0 && q != p {
				return nil
			}
			return chattrOne(s, q, showUnder(show, p, q), modes, a.has("V"))
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// chattrOne applies modes to p (named show in messages).
func chattrOne(s *session, p, show string, modes []attrMode, verbose bool) error {
	fi, err := s.fsys.Lstat(p)
	if err != nil {
		return fmt.Errorf("%s while trying to stat %s", reason("", err), show)
	}
	st, ok := fi.Sys().(*btrfs.Stat)
	if !ok || fi.Mode()&fs.ModeSymlink != 0 || !fi.IsDir() && !fi.Mode().IsRegular() {
		return fmt.Errorf("%s while reading flags on %s", reason("", syscall.EOPNOTSUPP), show)
	}
	flags := st.Flags & attrMask
	for _, m := range modes {
		switch m.op {
		case '+':
			flags |= m.flags
		case '-':
			flags &^= m.flags
		case '=':
			flags = m.flags
		}
	}
	if err := s.fsys.SetFileAttr(p, flags&^inodeVerity); err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return fmt.Errorf("%s while setting flags on %s", reason("", err), show)
	}
	if verbose {
		s.verbosef("Flags of %s set as %s", show, attrString(flags))
	}
	return nil
}

// attrMask are the flags lsattr and chattr see.
const attrMask = btrfs.InodeSync | btrfs.InodeDirSync | btrfs.InodeImmutable | btrfs.InodeAppend |
	btrfs.InodeNoDump | btrfs.InodeNoAtime | btrfs.InodeCompress | btrfs.InodeNoDataCow | btrfs.InodeNoCompress

var lsattrWord = word{
	name:     "lsattr",
	synopsis: "[-R] [-a] [-d] [-l] [-v] [--json] PATH...",
	short:    "List file attributes",
	long: `Print the attribute flags of each file as lsattr(1) prints them on btrfs, byte
for byte: 22 columns of letters, then the name. A directory lists its entries
(in directory order) unless -d is given; -a includes names starting with "."
(and . and ..), -R descends into directories, -l prints the flags' names, -v
the inode generation. Symbolic links and special files have no flags: a
message, as lsattr prints it, goes to standard error.`,
	flags: []flagDef{
		{name: "R", short: 'R', help: "list directories recursively"},
		{name: "a", short: 'a', help: "list all entries, . and .. too"},
		{name: "d", short: 'd', help: "list directories themselves, not their entries"},
		{name: "l", short: 'l', help: "print the flags' long names"},
		{name: "v", short: 'v', help: "print the inode generation"},
		{name: "json", long: "json", help: "print a JSON array of {file, flags, attributes, generation}"},
	},
	readOnly: true,
	run:      runLsattr,
}

// lsattrRun is the state of one lsattr command.
type lsattrRun struct {
	s    *session
	a    *wordArgs
	json []lsattrJSON // --json: the lines, printed at the end
}

// lsattrJSON is one line of lsattr --json.
type lsattrJSON struct {
	File       string   `json:"file"`
	Flags      string   `json:"flags"`
	Attributes []string `json:"attributes"`
	Generation uint64   `json:"generation"`
}

func runLsattr(s *session, a *wordArgs) error {
	if len(a.ops) == 0 {
		return usagef("missing PATH")
	}
	paths, err := s.paths(a.ops)
	if err != nil {
		return err
	}
	r := &lsattrRun{s: s, a: a}
	var errs []error
	for i, p := range paths {
		show := a.ops[i]
		fi, err := s.fsys.Lstat(p)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s while trying to stat %s", reason("", err), show))
			continue
		}
		if fi.IsDir() && !a.has("d") {
			if err := r.dir(p, show); err != nil {
				return err
			}
			continue
		}
		if err := r.list(p, show, fi); err != nil {
			errs = append(errs, err)
		}
	}
	if a.has("json") {
		if r.json == nil {
			r.json = []lsattrJSON{}
		}
		if err := writeJSON(s.out, r.json); err != nil {
			return err
		}
	}
	return errors.Join(errs...)
}

// list prints one line; a file without flags is an error naming it.
func (r *lsattrRun) list(p, show string, fi fs.FileInfo) error {
	st, ok := fi.Sys().(*btrfs.Stat)
	if !ok || !fi.IsDir() && !fi.Mode().IsRegular() {
		return fmt.Errorf("%s While reading flags on %s", reason("", syscall.EOPNOTSUPP), show)
	}
	if r.a.has("json") {
		j := lsattrJSON{File: show, Flags: attrString(st.Flags), Attributes: []string{}, Generation: st.Generation}
		for _, l := range attrLetters {
			if l.flag != 0 && st.Flags&l.flag != 0 {
				j.Attributes = append(j.Attributes, l.long)
			}
		}
		r.json = append(r.json, j)
		return nil
	}
	var b strings.Builder
	if r.a.has("v") {
		fmt.Fprintf(&b, "%-10d ", st.Generation)
	}
	if r.a.has("l") {
		fmt.Fprintf(&b, "%-28s %s\n", show, attrLong(st.Flags))
	} else {
		fmt.Fprintf(&b, "%s %s\n", attrString(st.Flags), show)
	}
	io.WriteString(r.s.out, b.String())
	return nil
}

// dir lists the entries of directory p in directory order; entries
// without flags are reported on the side (lsattr goes on and exits 0).
func (r *lsattrRun) dir(p, show string) error {
	ents, err := readDirIndexOrder(r.s.fsys, p)
	if err != nil {
		return err
	}
	names := make([]string, 0, len(ents)+2)
	if r.a.has("a") {
		names = append(names, ".", "..")
	}
	for _, e := range ents {
		if e.Name()[0] != '.' || r.a.has("a") {
			names = append(names, e.Name())
		}
	}
	for _, n := range names {
		q := joinFSPath(p, n)
		fi, err := r.s.fsys.Lstat(q)
		if err != nil {
			return err
		}
		qs := show + "/" + n
		if err := r.list(q, qs, fi); err != nil {
			r.s.warnf("%s", err)
			continue
		}
		if fi.IsDir() && r.a.has("R") && n != "." && n != ".." {
			if !r.a.has("json") {
				fmt.Fprintf(r.s.out, "\n%s:\n", qs)
			}
			if err := r.dir(q, qs); err != nil {
				return err
			}
			if !r.a.has("json") {
				fmt.Fprintln(r.s.out)
			}
		}
	}
	return nil
}

// joinFSPath joins an io/fs directory path and a name ("." and ".."
// resolved).
func joinFSPath(dir, name string) string {
	switch {
	case name == ".":
		return dir
	case name == "..":
		if dir == "." {
			return "."
		}
		return cleanFSPath(dir + "/..")
	case dir == ".":
		return name
	}
	return dir + "/" + name
}

// warnf reports a problem that does not stop the word: on standard error
// with the command's prefix at the top level, in the output of a script.
func (s *session) warnf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if s.warn != nil {
		s.warn(msg)
		return
	}
	fmt.Fprintln(s.out, msg)
}

// showUnder names q, a path below operand p, by p's name show.
func showUnder(show, p, q string) string {
	if q == p {
		return show
	}
	rel := q
	if p != "." {
		rel = strings.TrimPrefix(q, p+"/")
	}
	return strings.TrimSuffix(show, "/") + "/" + rel
}
