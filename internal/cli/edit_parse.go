package cli

import (
	"errors"
	"fmt"
	"io/fs"
	pathpkg "path"
	"strconv"
	"strings"
	"time"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/modespec"
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
	vals  map[string][]string // one entry per occurrence ("" for switches)
	order map[string]int      // position of each option's last occurrence
	seq   int                 // options seen so far
	ops   []string
}

// add records one occurrence of an option.
func (a *wordArgs) add(name, val string) {
	a.vals[name] = append(a.vals[name], val)
	a.seq++
	a.order[name] = a.seq
}

func (a *wordArgs) has(name string) bool { return len(a.vals[name]) > 0 }

// lastOf returns which of the named switches came last on the command
// line ("" if none did), for pairs where the later one wins (mv -f/-n).
func (a *wordArgs) lastOf(names ...string) string {
	last, at := "", -1
	for _, n := range names {
		if i, ok := a.order[n]; ok && i > at {
			last, at = n, i
		}
	}
	return last
}

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
	return parseArgs(defs, args, nil)
}

// parseArgs is parseWordArgs where an argument starting with "-" for
// which dashOperand is true is an operand, not options: chmod's "-w" is
// a mode even though chmod has options (-R), as in chmod(1).
func parseArgs(defs []flagDef, args []string, dashOperand func(string) bool) (*wordArgs, error) {
	a := &wordArgs{vals: map[string][]string{}, order: map[string]int{}}
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
		case len(s) > 1 && s[0] == '-' && hasShort(defs) && (dashOperand == nil || !dashOperand(s)):
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
	a.add(d.name, val)
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
			a.add(d.name, "")
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
		a.add(d.name, val)
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

// modeSpec is a parsed chmod mode; the parsing and the chmod(1) meaning
// live in internal/modespec, shared with mkfs --chmod.
type modeSpec struct{ modespec.Mode }

// parseMode parses a chmod mode (see package modespec: no umask applies,
// so "+w" is "a+w"), reporting a bad one as a usage error.
func parseMode(s string) (modeSpec, error) {
	m, err := modespec.Parse(s)
	if err != nil {
		return modeSpec{}, usagef("invalid mode %q", s)
	}
	return modeSpec{m}, nil
}

// apply returns the mode m gives a file with permission bits old (07777),
// as the fs.FileMode btrfs.FS.Chmod takes; isDir matters for X and the
// set-id bits directories keep.
func (m modeSpec) apply(old uint32, isDir bool) fs.FileMode {
	return btrfs.FileModeOf(m.Apply(old, isDir))
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
