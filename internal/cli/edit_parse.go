package cli

import (
	"errors"
	"fmt"
	"io/fs"
	pathpkg "path"
	"strconv"
	"strings"
	"time"
)

// splitLine splits one script line into words the way a POSIX shell
// would, without expansions: blanks separate words; 'single quotes' keep
// everything literally; "double quotes" keep everything but let a
// backslash escape ", \, $ and ` (before any other character the
// backslash stays); an unquoted backslash takes the next character
// literally; # at the start of a word begins a comment. An empty quoted
// string is an empty word. An unterminated quote or a backslash at the end
// of the line is an error: a line never continues on the next.
func splitLine(line string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == ' ' || c == '\t' || c == '\r':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case c == '#' && !inWord:
			return words, nil
		case c == '\\':
			if i+1 >= len(line) {
				return nil, errors.New("backslash at the end of the line")
			}
			i++
			cur.WriteByte(line[i])
			inWord = true
		case c == '\'':
			end := strings.IndexByte(line[i+1:], '\'')
			if end < 0 {
				return nil, fmt.Errorf("column %d: unterminated single quote", i+1)
			}
			cur.WriteString(line[i+1 : i+1+end])
			i += end + 1
			inWord = true
		case c == '"':
			next, err := doubleQuoted(line, i, &cur)
			if err != nil {
				return nil, err
			}
			i = next
			inWord = true
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

// doubleQuoted appends the contents of the double-quoted string that
// starts at line[start] to cur and returns the index of its closing quote.
func doubleQuoted(line string, start int, cur *strings.Builder) (int, error) {
	for i := start + 1; i < len(line); i++ {
		switch c := line[i]; c {
		case '"':
			return i, nil
		case '\\':
			if i+1 < len(line) && strings.IndexByte("\"\\$`", line[i+1]) >= 0 {
				i++
				cur.WriteByte(line[i])
			} else {
				cur.WriteByte(c)
			}
		default:
			cur.WriteByte(c)
		}
	}
	return 0, fmt.Errorf("column %d: unterminated double quote", start+1)
}

// flagDef describes one option of an editing word.
type flagDef struct {
	name  string // key in wordArgs.vals
	short byte   // 0: long form only
	long  string // "": short form only
	arg   bool   // takes a value
	meta  string // the value's name in help; "" for the upper-case name
	help  string
}

// spelling is how help shows the option.
func (d flagDef) spelling() string {
	var s []string
	if d.short != 0 {
		s = append(s, "-"+string(d.short))
	}
	if d.long != "" {
		s = append(s, "--"+d.long)
	}
	out := strings.Join(s, ", ")
	if d.arg && d.meta != "" {
		out += " " + d.meta
	} else if d.arg {
		out += " " + strings.ToUpper(d.name)
	}
	return out
}

// wordArgs is a parsed argument list: the options given and the operands.
type wordArgs struct {
	vals map[string][]string // one entry per occurrence ("" for switches)
	ops  []string
}

func (a *wordArgs) has(name string) bool { return len(a.vals[name]) > 0 }

// val returns the last value given for an option (later ones win, as with
// getopt-based tools).
func (a *wordArgs) val(name string) (string, bool) {
	v := a.vals[name]
	if len(v) == 0 {
		return "", false
	}
	return v[len(v)-1], true
}

// parseWordArgs parses args like GNU getopt_long: options may come
// anywhere before "--", short switches combine (-rf), a short option's
// value may be attached (-m755) or the next argument, a long option's
// value may follow "=" or come next.
// A word without short options (chmod) takes words starting with "-" as
// operands, so "chmod -w" works.
func parseWordArgs(defs []flagDef, args []string) (*wordArgs, error) {
	a := &wordArgs{vals: map[string][]string{}}
	for i := 0; i < len(args); i++ {
		s := args[i]
		switch {
		case s == "--":
			a.ops = append(a.ops, args[i+1:]...)
			return a, nil
		case strings.HasPrefix(s, "--"):
			n, err := a.parseLong(defs, args, i)
			if err != nil {
				return nil, err
			}
			i = n
		case len(s) > 1 && s[0] == '-' && hasShort(defs):
			n, err := a.parseShort(defs, args, i)
			if err != nil {
				return nil, err
			}
			i = n
		default:
			a.ops = append(a.ops, s)
		}
	}
	return a, nil
}

func hasShort(defs []flagDef) bool {
	for _, d := range defs {
		if d.short != 0 {
			return true
		}
	}
	return false
}

// parseLong parses the long option args[i] and returns the index of the
// last argument it used.
func (a *wordArgs) parseLong(defs []flagDef, args []string, i int) (int, error) {
	name, val, hasVal := strings.Cut(args[i][2:], "=")
	var d *flagDef
	for k := range defs {
		if defs[k].long == name {
			d = &defs[k]
		}
	}
	switch {
	case d == nil:
		return 0, usagef("unknown option --%s", name)
	case !d.arg && hasVal:
		return 0, usagef("option --%s takes no value", name)
	case d.arg && !hasVal:
		if i+1 >= len(args) {
			return 0, usagef("option --%s needs a value", name)
		}
		i++
		val = args[i]
	}
	a.vals[d.name] = append(a.vals[d.name], val)
	return i, nil
}

// parseShort parses the cluster of short options args[i] and returns the
// index of the last argument it used.
func (a *wordArgs) parseShort(defs []flagDef, args []string, i int) (int, error) {
	s := args[i]
	for j := 1; j < len(s); j++ {
		var d *flagDef
		for k := range defs {
			if defs[k].short == s[j] {
				d = &defs[k]
			}
		}
		if d == nil {
			return 0, usagef("unknown option -%c", s[j])
		}
		if !d.arg {
			a.vals[d.name] = append(a.vals[d.name], "")
			continue
		}
		val := s[j+1:]
		if val == "" {
			if i+1 >= len(args) {
				return 0, usagef("option -%c needs a value", s[j])
			}
			i++
			val = args[i]
		}
		a.vals[d.name] = append(a.vals[d.name], val)
		break
	}
	return i, nil
}

// cleanFSPath turns a path inside the filesystem (absolute or relative to
// its top, as a script writes it) into an io/fs path, "." for the top.
func cleanFSPath(p string) string {
	p = strings.TrimPrefix(pathpkg.Clean("/"+p), "/")
	if p == "" {
		return "."
	}
	return p
}

// modeSpec is a parsed chmod mode: an octal number or a list of symbolic
// clauses ([ugoa]*[-+=][rwxXst]*|[ugo], comma-separated).
type modeSpec struct {
	octal   bool
	val     uint32 // the octal mode
	digits  int    // how many digits it had
	clauses []modeClause
}

type modeClause struct {
	who     uint32 // the bits the clause may touch
	actions []modeAction
}

type modeAction struct {
	op    byte   // '+', '-' or '='
	perm  string // letters from rwxXst
	copyf byte   // 'u', 'g' or 'o': copy that class's bits instead
}

// Bits each class letter owns, with its set-id or sticky bit.
var whoBits = map[byte]uint32{'u': 0o4700, 'g': 0o2070, 'o': 0o1007, 'a': 0o7777}

// parseMode parses a chmod mode. Unlike chmod(1) no umask applies: a
// clause without u, g, o or a acts on all classes, so "+w" is "a+w".
func parseMode(s string) (modeSpec, error) {
	if s != "" && strings.Trim(s, "01234567") == "" {
		v, err := strconv.ParseUint(s, 8, 32)
		if err != nil || v > 0o7777 {
			return modeSpec{}, usagef("invalid mode %q", s)
		}
		return modeSpec{octal: true, val: uint32(v), digits: len(s)}, nil
	}
	var m modeSpec
	for _, part := range strings.Split(s, ",") {
		c, err := parseModeClause(part)
		if err != nil {
			return modeSpec{}, usagef("invalid mode %q", s)
		}
		m.clauses = append(m.clauses, c)
	}
	return m, nil
}

func parseModeClause(s string) (modeClause, error) {
	var c modeClause
	i := 0
	for ; i < len(s) && strings.IndexByte("ugoa", s[i]) >= 0; i++ {
		c.who |= whoBits[s[i]]
	}
	if c.who == 0 {
		c.who = whoBits['a']
	}
	if i == len(s) {
		return c, errors.New("no operator")
	}
	for i < len(s) {
		op := s[i]
		if op != '+' && op != '-' && op != '=' {
			return c, errors.New("bad operator")
		}
		i++
		a := modeAction{op: op}
		if i < len(s) && strings.IndexByte("ugo", s[i]) >= 0 {
			a.copyf = s[i]
			i++
		} else {
			j := i
			for ; j < len(s) && strings.IndexByte("rwxXst", s[j]) >= 0; j++ {
			}
			a.perm, i = s[i:j], j
		}
		c.actions = append(c.actions, a)
	}
	return c, nil
}

// apply returns the permission bits (07777) that the mode gives a file
// with bits old; isDir matters for X. As chmod(1) does, a directory keeps
// its set-id bits unless the mode names them: an octal mode of up to four
// digits only sets them ("00755" clears them), and "=" leaves them alone
// unless it lists s.
func (m modeSpec) apply(old uint32, isDir bool) fs.FileMode {
	if m.octal {
		if isDir && m.digits <= 4 {
			return permToFileMode(m.val | old&0o6000)
		}
		return permToFileMode(m.val)
	}
	cur := old & 0o7777
	for _, c := range m.clauses {
		for _, a := range c.actions {
			bits := a.bits(cur, isDir) & c.who
			switch a.op {
			case '+':
				cur |= bits
			case '-':
				cur &^= bits
			case '=':
				kept := uint32(0)
				if isDir {
					kept = cur & c.who & 0o6000
				}
				cur = cur&^c.who | bits | kept
			}
		}
	}
	return permToFileMode(cur)
}

// bits is what one action adds, removes or sets, before the class mask.
func (a modeAction) bits(cur uint32, isDir bool) uint32 {
	if a.copyf != 0 {
		shift := map[byte]uint{'u': 6, 'g': 3, 'o': 0}[a.copyf]
		rwx := cur >> shift & 7
		return rwx<<6 | rwx<<3 | rwx
	}
	var b uint32
	for _, l := range []byte(a.perm) {
		switch l {
		case 'r':
			b |= 0o444
		case 'w':
			b |= 0o222
		case 'x':
			b |= 0o111
		case 'X':
			if isDir || cur&0o111 != 0 {
				b |= 0o111
			}
		case 's':
			b |= 0o6000
		case 't':
			b |= 0o1000
		}
	}
	return b
}

// permToFileMode converts Linux permission, set-id and sticky bits to an
// fs.FileMode.
func permToFileMode(p uint32) fs.FileMode {
	m := fs.FileMode(p & 0o777)
	if p&0o4000 != 0 {
		m |= fs.ModeSetuid
	}
	if p&0o2000 != 0 {
		m |= fs.ModeSetgid
	}
	if p&0o1000 != 0 {
		m |= fs.ModeSticky
	}
	return m
}

// dateLayouts are the forms touch -d takes besides RFC 3339 and
// @SECONDS; without an offset the time is UTC. A fraction of a second
// after the seconds is accepted by every layout with seconds.
var dateLayouts = []string{
	time.RFC3339Nano,
	"2006-01-02 15:04:05Z07:00",
	"2006-01-02 15:04:05",
	"2006-01-02 15:04Z07:00",
	"2006-01-02 15:04",
	"2006-01-02",
}

// parseDate parses a touch -d DATE.
func parseDate(s string) (time.Time, error) {
	if rest, ok := strings.CutPrefix(s, "@"); ok {
		return parseEpoch(rest)
	}
	for _, l := range dateLayouts {
		if t, err := time.ParseInLocation(l, s, time.UTC); err == nil {
			return t, nil
		}
	}
	return time.Time{}, usagef("invalid date %q (RFC 3339, YYYY-MM-DD, \"YYYY-MM-DD HH:MM[:SS[.frac]]\" or @SECONDS[.frac])", s)
}

// parseEpoch parses SECONDS[.frac] since the Unix epoch.
func parseEpoch(s string) (time.Time, error) {
	secs, frac, hasFrac := strings.Cut(s, ".")
	sec, err := strconv.ParseInt(secs, 10, 64)
	bad := err != nil || (hasFrac && (frac == "" || len(frac) > 9 || strings.Trim(frac, "0123456789") != ""))
	if bad {
		return time.Time{}, usagef("invalid date @%s", s)
	}
	var ns int64
	if hasFrac {
		ns, _ = strconv.ParseInt((frac + "000000000")[:9], 10, 64)
		if strings.HasPrefix(secs, "-") {
			ns = -ns
		}
	}
	return time.Unix(sec, ns).UTC(), nil
}
