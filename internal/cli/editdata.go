package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/gobtrfs/btrfs"
)

// Words that change file contents: truncate, fallocate and write.

func newTruncateCommand() *cobra.Command  { return wordCommand(&truncateWord) }
func newFallocateCommand() *cobra.Command { return wordCommand(&fallocateWord) }
func newWriteCommand() *cobra.Command     { return wordCommand(&writeWord) }

var truncateWord = word{
	name:     "truncate",
	synopsis: "[-c] -s SIZE PATH...",
	short:    "Shrink or extend the size of files",
	long: `Set the size of each regular file to SIZE, making an empty file (mode 644) where
none exists unless -c is given. Growing adds a hole; shrinking drops the data
past the new end. SIZE is a number with an optional unit: K, M, G, T, P, E
(or KiB, MiB, ...: powers of 1024) or KB, MB, GB, TB, PB, EB (powers of
1000). A prefix makes it relative to the current size, as with truncate(1):
  +SIZE extend by, -SIZE reduce by (not below 0), <SIZE at most,
  >SIZE at least, /SIZE round down to a multiple of, %SIZE round up to one.
A symbolic link operand changes the file it points to.`,
	flags: []flagDef{
		{name: "size", short: 's', long: "size", arg: true, help: "set or adjust the size by SIZE bytes"},
		{name: "c", short: 'c', long: "no-create", help: "do not make missing files"},
	},
	run: runTruncate,
}

// sizeSpec is a parsed truncate SIZE: a byte count and how it applies.
type sizeSpec struct {
	op byte // 0 (set), '+', '-', '<', '>', '/', '%'
	n  int64
}

func parseSizeSpec(s string) (sizeSpec, error) {
	var sp sizeSpec
	if s != "" && strings.IndexByte("+-<>/%", s[0]) >= 0 {
		sp.op, s = s[0], s[1:]
	}
	n, err := parseBytes(s)
	if err != nil {
		return sp, err
	}
	if n == 0 && (sp.op == '/' || sp.op == '%') {
		return sp, usagef("division by zero in size %q", s)
	}
	sp.n = n
	return sp, nil
}

// apply returns the new size for a file of size cur.
func (sp sizeSpec) apply(cur int64) (int64, error) {
	switch sp.op {
	case '+':
		if cur > math.MaxInt64-sp.n {
			return 0, errors.New("size overflows")
		}
		return cur + sp.n, nil
	case '-':
		return max(cur-sp.n, 0), nil
	case '<':
		return min(cur, sp.n), nil
	case '>':
		return max(cur, sp.n), nil
	case '/':
		return cur / sp.n * sp.n, nil
	case '%':
		r := (cur + sp.n - 1) / sp.n * sp.n
		if cur > math.MaxInt64-sp.n+1 {
			return 0, errors.New("size overflows")
		}
		return r, nil
	}
	return sp.n, nil
}

// byteUnits maps unit suffixes to their factors: one letter or with iB
// powers of 1024, with B powers of 1000 (as coreutils and util-linux).
var byteUnits = map[string]int64{"": 1, "B": 1}

func init() {
	f2, f10 := int64(1), int64(1)
	for _, u := range "KMGTPE" {
		f2, f10 = f2*1024, f10*1000
		byteUnits[string(u)], byteUnits[string(u)+"iB"], byteUnits[string(u)+"B"] = f2, f2, f10
		lu := strings.ToLower(string(u))
		byteUnits[lu] = f2
	}
}

// parseBytes parses a non-negative byte count with an optional unit
// (4096, 64K, 1MiB, 1MB, 0x1000).
func parseBytes(s string) (int64, error) {
	i := len(s)
	for i > 0 && (s[i-1] < '0' || s[i-1] > '9') {
		i--
	}
	if strings.HasPrefix(s, "0x") || strings.HasPrefix(s, "0X") {
		i = len(s)
	}
	num, unit := s[:i], s[i:]
	f, ok := byteUnits[unit]
	n, err := strconv.ParseInt(num, 0, 64)
	if !ok || err != nil || n < 0 {
		return 0, usagef("invalid size %q", s)
	}
	if n > math.MaxInt64/f {
		return 0, usagef("size %q too large", s)
	}
	return n * f, nil
}

func runTruncate(s *session, a *wordArgs) error {
	v, ok := a.val("size")
	if !ok {
		return usagef("-s SIZE is required")
	}
	sp, err := parseSizeSpec(v)
	if err != nil {
		return err
	}
	if len(a.ops) == 0 {
		return usagef("missing operand")
	}
	paths, err := s.paths(a.ops)
	if err != nil {
		return err
	}
	for _, p := range paths {
		if err := truncateOne(s.fsys, p, sp, !a.has("c")); err != nil {
			return err
		}
	}
	return nil
}

// regularOrCreate follows p to a regular file, making an empty one when
// it does not exist and create is set. It returns the file's path and
// size, or ok false when p is missing and may stay so.
func regularOrCreate(fsys *btrfs.FS, p string, create bool) (string, int64, bool, error) {
	p, err := followLinks(fsys, p)
	if err != nil {
		return "", 0, false, err
	}
	fi, err := fsys.Lstat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist) && create:
		return p, 0, true, fsys.CreateEmpty(p, defaultFilePerm)
	case errors.Is(err, fs.ErrNotExist):
		return "", 0, false, nil
	case err != nil:
		return "", 0, false, err
	case fi.IsDir():
		return "", 0, false, &fs.PathError{Op: "open", Path: p, Err: syscall.EISDIR}
	case !fi.Mode().IsRegular():
		return "", 0, false, &fs.PathError{Op: "open", Path: p, Err: errors.New("not a regular file")}
	}
	return p, fi.Size(), true, nil
}

func truncateOne(fsys *btrfs.FS, p string, sp sizeSpec, create bool) error {
	p, cur, ok, err := regularOrCreate(fsys, p, create)
	if err != nil || !ok {
		return err
	}
	size, err := sp.apply(cur)
	if err != nil {
		return fmt.Errorf("%s: %v", p, err)
	}
	return fsys.Truncate(p, size)
}

var fallocateWord = word{
	name:     "fallocate",
	synopsis: "[-n] [-p] [-o OFFSET] -l LENGTH PATH",
	short:    "Preallocate or punch holes in a file",
	long: `Preallocate LENGTH bytes of the regular file PATH from OFFSET (default 0) as
unwritten extents that read as zeros, keeping data already there and making
the file (mode 644) when missing; the size grows to OFFSET+LENGTH unless -n.
With -p the range is deallocated instead (a hole; the size never changes, so
-p implies -n, and the file must exist). OFFSET and LENGTH take the units of
truncate (K, MiB, MB, ...), as util-linux fallocate does.`,
	flags: []flagDef{
		{name: "offset", short: 'o', long: "offset", arg: true, help: "start of the range (default 0)"},
		{name: "length", short: 'l', long: "length", arg: true, help: "length of the range (required)"},
		{name: "n", short: 'n', long: "keep-size", help: "do not change the file size"},
		{name: "p", short: 'p', long: "punch-hole", help: "make the range a hole (implies -n)"},
	},
	hHelp: true,
	run:   runFallocate,
}

func runFallocate(s *session, a *wordArgs) error {
	var off, length int64
	var err error
	if v, ok := a.val("offset"); ok {
		if off, err = parseBytes(v); err != nil {
			return err
		}
	}
	v, ok := a.val("length")
	if !ok {
		return usagef("-l LENGTH is required")
	}
	if length, err = parseBytes(v); err != nil {
		return err
	}
	if length == 0 {
		return usagef("invalid length value specified")
	}
	if off > math.MaxInt64-length {
		return usagef("offset plus length too large")
	}
	if len(a.ops) != 1 {
		return usagef("need exactly one PATH")
	}
	p, err := s.path(a.ops[0])
	if err != nil {
		return err
	}
	punch := a.has("p")
	p, _, ok, err = regularOrCreate(s.fsys, p, !punch)
	if err != nil {
		return err
	}
	if !ok {
		return &fs.PathError{Op: "fallocate", Path: a.ops[0], Err: fs.ErrNotExist}
	}
	if punch {
		return s.fsys.PunchHole(p, off, length)
	}
	return s.fsys.Fallocate(p, off, length, a.has("n"))
}

var writeWord = word{
	name:     "write",
	synopsis: "[-a | -o OFFSET] [-e] (-f HOSTFILE PATH | PATH TEXT)",
	short:    "Write text or a host file's contents into a file",
	long: `Write TEXT (one operand; quote it in a script) or, with -f, the contents of the
host file HOSTFILE into the regular file PATH, made (mode 644) if missing.
By default PATH is overwritten from the start and cut to what was written,
like the shell's ">". With -a the data goes after the end (">>"); with
-o OFFSET it goes at OFFSET without cutting the file (dd conv=notrunc).
TEXT is written as given, with no newline added; with -e the escapes \n \t
\r \\ \0NNN (octal) and \xHH in TEXT are turned into their bytes. HOSTFILE
is streamed, not read into memory; holes in it are written as zeros. A
symbolic link operand writes the file it points to.`,
	flags: []flagDef{
		{name: "a", short: 'a', long: "append", help: "write at the end of the file"},
		{name: "offset", short: 'o', long: "offset", arg: true, help: "write at OFFSET, keeping the rest"},
		{name: "e", short: 'e', help: "interpret backslash escapes in TEXT"},
		{name: "file", short: 'f', long: "file", arg: true, meta: "HOSTFILE", help: "write the contents of the host file HOSTFILE"},
	},
	run: runWrite,
}

func runWrite(s *session, a *wordArgs) error {
	host, fromFile := a.val("file")
	want := 2
	if fromFile {
		want = 1
	}
	if len(a.ops) != want {
		if fromFile {
			return usagef("-f HOSTFILE takes one PATH and no TEXT")
		}
		return usagef("need PATH and TEXT (or -f HOSTFILE PATH)")
	}
	var text []byte
	if !fromFile {
		text = []byte(a.ops[1])
		if a.has("e") {
			var err error
			if text, err = unescapeText(a.ops[1]); err != nil {
				return err
			}
		}
	}
	off, hasOff := int64(0), false
	if v, ok := a.val("offset"); ok {
		if a.has("a") {
			return usagef("-a and -o exclude each other")
		}
		var err error
		if off, err = parseBytes(v); err != nil {
			return err
		}
		hasOff = true
	}
	p, err := s.path(a.ops[0])
	if err != nil {
		return err
	}
	p, size, _, err := regularOrCreate(s.fsys, p, true)
	if err != nil {
		return err
	}
	switch {
	case a.has("a"):
		off = size
	case !hasOff && size > 0:
		if err := s.fsys.Truncate(p, 0); err != nil {
			return err
		}
	}
	if !fromFile {
		if len(text) == 0 {
			return nil
		}
		_, err = s.fsys.WriteAt(p, text, off)
		return err
	}
	return writeHostFile(s.fsys, p, host, off)
}

// writeHostFile streams the host file host into p at off.
func writeHostFile(fsys *btrfs.FS, p, host string, off int64) error {
	f, err := os.Open(host)
	if err != nil {
		return err
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.IsDir() {
		return &fs.PathError{Op: "write", Path: host, Err: syscall.EISDIR}
	}
	_, err = fsys.WriteFrom(p, f, off)
	return err
}

// unescapeText turns the backslash escapes of write -e into bytes.
func unescapeText(s string) ([]byte, error) {
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' {
			out = append(out, c)
			continue
		}
		if i+1 >= len(s) {
			return nil, usagef("backslash at the end of TEXT")
		}
		i++
		switch s[i] {
		case 'n':
			out = append(out, '\n')
		case 't':
			out = append(out, '\t')
		case 'r':
			out = append(out, '\r')
		case '\\':
			out = append(out, '\\')
		case '0':
			j := i + 1
			for j < len(s) && j < i+4 && s[j] >= '0' && s[j] <= '7' {
				j++
			}
			v, _ := strconv.ParseUint("0"+s[i+1:j], 8, 16)
			if v > 0xff {
				return nil, usagef("octal escape \\%s out of range", s[i:j])
			}
			out = append(out, byte(v))
			i = j - 1
		case 'x':
			if i+3 > len(s) {
				return nil, usagef("\\x needs two hex digits")
			}
			v, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
			if err != nil {
				return nil, usagef("\\x needs two hex digits")
			}
			out = append(out, byte(v))
			i += 2
		default:
			return nil, usagef("unknown escape \\%c", s[i])
		}
	}
	return out, nil
}
