package cli

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os/user"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/gobtrfs/btrfs"
)

var chmodWord = word{
	name:     "chmod",
	synopsis: "[-R] MODE PATH...",
	short:    "Change permissions",
	long: `Set the mode of each file: octal (755, 4755) or symbolic (u+x, go-w, a=r, u+s,
+t, g=u, comma lists). No umask applies: "+w" means "a+w". A symbolic link
operand changes the file it points to, and directories keep their set-id bits
unless the mode names them (00755 clears them), as chmod(1) does. With -R,
everything below a directory operand changes too; symbolic links met on the
way are left alone, as chmod -R does.`,
	flags: []flagDef{
		{name: "R", short: 'R', long: "recursive", help: "change files and directories recursively"},
	},
	// "-w", "-x,g+r": a mode, not options, as chmod(1) reads them.
	dashOperand: func(arg string) bool { _, err := parseMode(arg); return err == nil },
	run:         runChmod,
}

func runChmod(s *session, a *wordArgs) error {
	if len(a.ops) == 0 {
		return usagef("missing operand")
	}
	if len(a.ops) == 1 {
		return usagef("missing operand after %s", quoteName(a.ops[0]))
	}
	m, err := parseMode(a.ops[0])
	if err != nil {
		return err
	}
	paths, err := s.paths(a.ops[1:])
	if err != nil {
		return err
	}
	for _, p := range paths {
		if p, err = followLinks(s.fsys, p); err != nil {
			return err
		}
		if !a.has("R") {
			fi, err := s.fsys.Lstat(p)
			if err != nil {
				return err
			}
			if err := chmodOne(s.fsys, p, fi, m); err != nil {
				return err
			}
			continue
		}
		err := walkTree(s.fsys, p, false, func(q string, fi fs.FileInfo) error {
			if fi.Mode()&fs.ModeSymlink != 0 {
				return nil
			}
			return chmodOne(s.fsys, q, fi, m)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// chmodOne applies m to p, whose current state is fi.
func chmodOne(fsys *btrfs.FS, p string, fi fs.FileInfo, m modeSpec) error {
	old := btrfs.UnixMode(fi.Mode()) & 0o7777
	return fsys.Chmod(p, m.apply(old, fi.IsDir()))
}

var chownWord = word{
	name:     "chown",
	synopsis: "[-R] [-h] OWNER[:GROUP] PATH...",
	short:    "Change owner and group",
	long: `Set the owner and/or group of each file. OWNER and GROUP are numeric ids or
names looked up on this host (not in the image). "OWNER:" also sets the
owner's login group; ":GROUP" changes only the group. Unlike chown(1), a
symbolic link operand is changed itself, not the file it points to (always
as with -h). With -R, everything below a directory operand changes too,
symbolic links themselves, as chown -R does.`,
	flags: []flagDef{
		{name: "R", short: 'R', long: "recursive", help: "change files and directories recursively"},
		{name: "h", short: 'h', long: "no-dereference", help: "change symbolic links themselves (always done)"},
	},
	run: runChown,
}

func runChown(s *session, a *wordArgs) error {
	if len(a.ops) == 0 {
		return usagef("missing operand")
	}
	if len(a.ops) == 1 {
		return usagef("missing operand after %s", quoteName(a.ops[0]))
	}
	uid, gid, err := parseOwner(a.ops[0])
	if err != nil {
		return err
	}
	paths, err := s.paths(a.ops[1:])
	if err != nil {
		return err
	}
	for _, p := range paths {
		if !a.has("R") {
			if err := s.fsys.Chown(p, uid, gid); err != nil {
				return err
			}
			continue
		}
		err := walkTree(s.fsys, p, false, func(q string, _ fs.FileInfo) error {
			return s.fsys.Chown(q, uid, gid)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// parseOwner parses OWNER[:GROUP]; -1 stands for "keep".
func parseOwner(spec string) (uid, gid int, err error) {
	owner, group, colon := strings.Cut(spec, ":")
	uid, gid = -1, -1
	if owner != "" {
		var u *user.User
		if uid, u, err = lookupID(owner, user.Lookup, user.LookupId); err != nil {
			return 0, 0, err
		}
		if colon && group == "" {
			if u == nil {
				return 0, 0, fmt.Errorf("%s: no login group for owner %s", spec, owner)
			}
			if gid, err = strconv.Atoi(u.Gid); err != nil {
				return 0, 0, fmt.Errorf("%s: login group %q is not numeric", spec, u.Gid)
			}
		}
	}
	if group != "" {
		if _, err := strconv.ParseUint(group, 10, 32); err == nil {
			gid, _ = strconv.Atoi(group)
		} else {
			g, err := user.LookupGroup(group)
			if err != nil {
				return 0, 0, fmt.Errorf("invalid group %q: %v", group, err)
			}
			if gid, err = strconv.Atoi(g.Gid); err != nil {
				return 0, 0, fmt.Errorf("group %q has non-numeric id %q", group, g.Gid)
			}
		}
	}
	if owner == "" && group == "" && !colon {
		return 0, 0, usagef("empty OWNER")
	}
	return uid, gid, nil
}

// lookupID resolves a numeric or named user; the *user.User is nil when
// a numeric id has no entry on this host.
func lookupID(s string, byName, byID func(string) (*user.User, error)) (int, *user.User, error) {
	if v, err := strconv.ParseUint(s, 10, 32); err == nil && v < 1<<32-1 {
		u, _ := byID(s)
		return int(v), u, nil
	}
	u, err := byName(s)
	if err != nil {
		return 0, nil, fmt.Errorf("invalid user %q: %v", s, err)
	}
	id, err := strconv.Atoi(u.Uid)
	if err != nil {
		return 0, nil, fmt.Errorf("user %q has non-numeric id %q", s, u.Uid)
	}
	return id, u, nil
}

var touchWord = word{
	name:     "touch",
	synopsis: "[-d DATE | -r REF] [-a] [-m] [-c] [-h] PATH...",
	short:    "Change file times, making empty files",
	long: `Set the access and modification times of each file to now, to DATE or to the
times of the file REF, making an empty file (mode 644) where none exists unless
-c or -h is given. DATE is one of
  RFC 3339                      2024-05-06T07:08:09.5+02:00
  YYYY-MM-DD                    2024-05-06 (midnight UTC)
  "YYYY-MM-DD HH:MM[:SS[.frac]]" UTC unless an offset follows (Z, +02:00)
  @SECONDS[.frac]               seconds since 1970-01-01 UTC
REF is a path in the same image (IMAGE:PATH at the top level); a symbolic link
REF gives the times of the file it points to. A symbolic link operand changes
the file it points to, as touch(1) does; with -h the link itself.`,
	flags: []flagDef{
		{name: "date", short: 'd', long: "date", arg: true, help: "use DATE instead of now"},
		{name: "reference", short: 'r', long: "reference", arg: true, meta: "REF", help: "use REF's times instead of now"},
		{name: "a", short: 'a', help: "change only the access time"},
		{name: "m", short: 'm', help: "change only the modification time"},
		{name: "c", short: 'c', long: "no-create", help: "do not make missing files"},
		{name: "h", short: 'h', long: "no-dereference", help: "change a symbolic link itself (makes nothing)"},
	},
	run: runTouch,
}

func runTouch(s *session, a *wordArgs) error {
	if len(a.ops) == 0 {
		return usagef("missing file operand")
	}
	now := time.Now()
	atimeSet, mtimeSet := now, now
	_, dated := a.val("date")
	ref, refed := a.val("reference")
	if dated && refed {
		return usagef("cannot take the times from both -d and -r")
	}
	if v, ok := a.val("date"); ok {
		t, err := parseDate(v)
		if err != nil {
			return err
		}
		atimeSet, mtimeSet = t, t
	}
	if refed {
		st, err := refTimes(s, ref)
		if err != nil {
			return err
		}
		atimeSet, mtimeSet, dated = st.Atime, st.Mtime, true
	}
	paths, err := s.paths(a.ops)
	if err != nil {
		return err
	}
	onlyA, onlyM := a.has("a") && !a.has("m"), a.has("m") && !a.has("a")
	noDeref := a.has("h")
	create := !a.has("c") && !noDeref
	for _, p := range paths {
		var created bool
		if noDeref {
			if _, err := s.fsys.Lstat(p); err != nil {
				return &fs.PathError{Op: "setting times of", Path: p, Err: fs.ErrNotExist}
			}
		} else if p, created, err = touchTarget(s.fsys, p, create); err != nil {
			return err
		}
		if created && !dated {
			continue // a new file already has the current times
		}
		atime, mtime := atimeSet, mtimeSet
		if onlyA || onlyM {
			if fi, err := s.fsys.Lstat(p); err == nil {
				if st, ok := fi.Sys().(*btrfs.Stat); ok {
					if onlyA {
						mtime = st.Mtime
					} else {
						atime = st.Atime
					}
				}
			}
		}
		err := s.fsys.Chtimes(p, atime, mtime)
		if err != nil && !(a.has("c") && errors.Is(err, fs.ErrNotExist)) {
			return err
		}
	}
	return nil
}

// refTimes returns the stat of touch -r's REF, a path in the session's
// image, following symbolic links as touch(1) does.
func refTimes(s *session, ref string) (*btrfs.Stat, error) {
	p, err := s.path(ref)
	if err != nil {
		return nil, err
	}
	if p, err = followLinks(s.fsys, p); err != nil {
		return nil, err
	}
	fi, err := s.fsys.Lstat(p)
	if err != nil {
		return nil, fmt.Errorf("failed to get attributes of %s: %s", quoteName(ref), reason(p, err))
	}
	st, ok := fi.Sys().(*btrfs.Stat)
	if !ok {
		return nil, fmt.Errorf("%s: no times", ref)
	}
	return st, nil
}

// touchTarget returns the file touch changes for operand p, following a
// symlink, after making it (when create) if it did not exist; created
// says it was made now. Making it first spares the common case of a new
// file any lookup.
func touchTarget(fsys *btrfs.FS, p string, create bool) (string, bool, error) {
	if create {
		err := fsys.CreateEmpty(p, defaultFilePerm)
		if err == nil {
			return p, true, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return "", false, err
		}
	}
	target, err := followLinks(fsys, p)
	if err != nil || target == p || !create {
		return target, false, err
	}
	// A dangling symlink: touch(1) makes the file it names.
	err = fsys.CreateEmpty(target, defaultFilePerm)
	if err != nil && !errors.Is(err, fs.ErrExist) {
		return "", false, err
	}
	return target, err == nil, nil
}

var setfattrWord = word{
	name:     "setfattr",
	synopsis: "{-n NAME [-v VALUE] | -x NAME} PATH...",
	short:    "Set or remove extended attributes",
	long: `Set extended attribute NAME of each file to VALUE (empty without -v), or remove
it with -x. VALUE is encoded as for setfattr(1): 0xHEX, 0sBASE64, "text with
\ooo octal escapes" in double quotes, or else the text itself. Symbolic links
are not followed.`,
	flags: []flagDef{
		{name: "name", short: 'n', long: "name", arg: true, help: "the attribute to set"},
		{name: "value", short: 'v', long: "value", arg: true, help: "the value to set"},
		{name: "remove", short: 'x', long: "remove", arg: true, meta: "NAME", help: "the attribute to remove"},
		{name: "h", short: 'h', long: "no-dereference", help: "accepted for compatibility (links are never followed)"},
	},
	run: runSetfattr,
}

func runSetfattr(s *session, a *wordArgs) error {
	name, set := a.val("name")
	rm, remove := a.val("remove")
	v, hasV := a.val("value")
	switch {
	case set == remove:
		return usagef("give exactly one of -n and -x")
	case remove && hasV:
		return usagef("-v goes with -n, not -x")
	case len(a.ops) == 0:
		return usagef("missing PATH")
	}
	value, err := decodeXattrValue(v)
	if err != nil {
		return err
	}
	paths, err := s.paths(a.ops)
	if err != nil {
		return err
	}
	for _, p := range paths {
		if remove {
			err = s.fsys.Removexattr(p, rm)
		} else {
			err = s.fsys.Setxattr(p, name, value)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// decodeXattrValue decodes a setfattr VALUE.
func decodeXattrValue(v string) ([]byte, error) {
	if len(v) >= 2 && v[0] == '0' {
		var b []byte
		var err error
		switch v[1] {
		case 'x', 'X':
			b, err = hex.DecodeString(v[2:])
		case 's', 'S':
			b, err = base64.StdEncoding.DecodeString(v[2:])
		default:
			return []byte(v), nil
		}
		if err != nil {
			return nil, usagef("bad value %q: %v", v, err)
		}
		return b, nil
	}
	if len(v) == 0 || v[0] != '"' {
		return []byte(v), nil
	}
	var b []byte
	for i := 1; i < len(v) && v[i] != '"'; i++ {
		if v[i] != '\\' || i+1 >= len(v) {
			b = append(b, v[i])
			continue
		}
		i++
		if v[i] < '0' || v[i] > '7' {
			b = append(b, v[i])
			continue
		}
		n := 0
		for k := 0; k < 3 && i < len(v) && v[i] >= '0' && v[i] <= '7'; k++ {
			n = n*8 + int(v[i]-'0')
			i++
		}
		i--
		b = append(b, byte(n))
	}
	return b, nil
}

var getfattrWord = word{
	name:     "getfattr",
	synopsis: "[-d] [-n NAME] [-m PATTERN] [-e text|hex|base64] [--json] PATH...",
	short:    "Print extended attributes",
	long: `Print extended attributes the way getfattr(1) does, byte for byte: the names
matching PATTERN (a regular expression, default "^user\."), with -d their
values too, or with -n only attribute NAME and its value. Values are shown as
"text", 0xHEX or 0sBASE64 (-e; by default text unless the value is mostly not
printable). With --json, a JSON array of {"file", "xattrs": [{"name",
"value"}]} objects instead, values encoded the same way (text unquoted).
Symbolic links are followed unless -h is given.`,
	flags: []flagDef{
		{name: "d", short: 'd', long: "dump", help: "print values as well as names"},
		{name: "name", short: 'n', long: "name", arg: true, help: "print only this attribute"},
		{name: "match", short: 'm', long: "match", arg: true, meta: "PATTERN", help: "print the names matching this regular expression"},
		{name: "encoding", short: 'e', long: "encoding", arg: true, meta: "ENC", help: "text, hex or base64"},
		{name: "h", short: 'h', long: "no-dereference", help: "do not follow symbolic links"},
		{name: "json", long: "json", help: "print JSON"},
	},
	readOnly: true,
	run:      runGetfattr,
}

// xattrJSON is one file of getfattr --json.
type xattrJSON struct {
	File   string          `json:"file"`
	Xattrs []xattrJSONItem `json:"xattrs"`
}

type xattrJSONItem struct {
	Name  string  `json:"name"`
	Value *string `json:"value,omitempty"` // only with -d or -n
	raw   string
}

func runGetfattr(s *session, a *wordArgs) error {
	if len(a.ops) == 0 {
		return usagef("missing PATH")
	}
	enc, _ := a.val("encoding")
	if enc != "" && enc != "text" && enc != "hex" && enc != "base64" {
		return usagef("unknown encoding %q", enc)
	}
	pat := `^user\.`
	if v, ok := a.val("match"); ok {
		pat = v
		if v == "-" {
			pat = ""
		}
	}
	re, err := regexp.Compile(pat)
	if err != nil {
		return usagef("bad pattern %q: %v", pat, err)
	}
	paths, err := s.paths(a.ops)
	if err != nil {
		return err
	}
	var all []xattrJSON
	for _, p := range paths {
		f, err := getfattrOne(s.fsys, p, a, re)
		if err != nil {
			return err
		}
		if a.has("json") {
			for i := range f.Xattrs {
				if a.has("d") || a.has("name") {
					v := encodeXattr(f.Xattrs[i].raw, enc, false)
					f.Xattrs[i].Value = &v
				}
			}
			all = append(all, f)
			continue
		}
		printGetfattr(s.out, f, enc, a.has("d") || a.has("name"))
	}
	if a.has("json") {
		if all == nil {
			all = []xattrJSON{}
		}
		e := json.NewEncoder(s.out)
		e.SetIndent("", "  ")
		return e.Encode(all)
	}
	return nil
}

// getfattrOne collects the selected attributes of one file, values raw.
func getfattrOne(fsys *btrfs.FS, p string, a *wordArgs, re *regexp.Regexp) (xattrJSON, error) {
	f := xattrJSON{File: p, Xattrs: []xattrJSONItem{}}
	var err error
	if !a.has("h") {
		if p, err = followLinks(fsys, p); err != nil {
			return f, err
		}
	}
	if name, ok := a.val("name"); ok {
		v, err := fsys.Getxattr(p, name)
		if errors.Is(err, errNoData) {
			return f, fmt.Errorf("%s: %s: No such attribute", f.File, name)
		}
		if err != nil {
			return f, err
		}
		f.Xattrs = append(f.Xattrs, xattrJSONItem{Name: name, raw: string(v)})
		return f, nil
	}
	xs, err := fsys.Xattrs(p)
	if err != nil {
		return f, err
	}
	for _, x := range xs { // sorted by name, as getfattr prints them
		if re.MatchString(x.Name) {
			f.Xattrs = append(f.Xattrs, xattrJSONItem{Name: x.Name, raw: string(x.Value)})
		}
	}
	return f, nil
}

// printGetfattr prints one file as getfattr(1) does: nothing when no
// attribute was selected, else a "# file:" header, one line per attribute
// and a blank line.
func printGetfattr(w io.Writer, f xattrJSON, enc string, values bool) {
	if len(f.Xattrs) == 0 {
		return
	}
	var b strings.Builder
	b.WriteString("# file: " + octalQuote(f.File, "\n\r") + "\n")
	for _, x := range f.Xattrs {
		b.WriteString(octalQuote(x.Name, "=\n\r"))
		if values {
			b.WriteString("=" + encodeXattr(x.raw, enc, true))
		}
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
	io.WriteString(w, b.String())
}

// octalQuote writes backslashes and the bytes in special as \ooo, as
// getfattr does for file and attribute names.
func octalQuote(s, special string) string {
	if !strings.ContainsAny(s, special+"\\") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '\\' || strings.IndexByte(special, c) >= 0 {
			fmt.Fprintf(&b, "\\%03o", c)
		} else {
			b.WriteByte(c)
		}
	}
	return b.String()
}

// encodeXattr encodes a value as getfattr does for enc ("" picks text
// when at most one byte in eight is not printable, else base64). Text
// drops one final NUL; quoted text is getfattr's "..." with \ooo escapes.
func encodeXattr(v, enc string, quoted bool) string {
	if enc == "" {
		enc = "base64"
		if wellPrintable(strings.TrimSuffix(v, "\x00")) {
			enc = "text"
		}
	}
	switch enc {
	case "hex":
		return "0x" + hex.EncodeToString([]byte(v))
	case "base64":
		return "0s" + base64.StdEncoding.EncodeToString([]byte(v))
	}
	v = strings.TrimSuffix(v, "\x00")
	if !quoted {
		return v
	}
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(v); i++ {
		switch c := v[i]; c {
		case 0, '\n', '\r':
			fmt.Fprintf(&b, "\\%03o", c)
		case '\\', '"':
			b.WriteByte('\\')
			b.WriteByte(c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// wellPrintable reports whether at most one byte in eight of v is outside
// printable ASCII (isprint in the C locale).
func wellPrintable(v string) bool {
	nonpr := 0
	for i := 0; i < len(v); i++ {
		if v[i] < 0x20 || v[i] > 0x7e {
			nonpr++
		}
	}
	return len(v) >= nonpr*8
}
