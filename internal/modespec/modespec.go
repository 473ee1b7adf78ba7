package modespec

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Mode is a parsed chmod mode. The zero value is not a valid mode; get
// one from Parse.
type Mode struct {
	octal   bool
	val     uint32 // the octal mode
	digits  int    // how many digits it had
	clauses []clause
}

type clause struct {
	who     uint32 // the bits the clause may touch
	actions []action
}

type action struct {
	op    byte   // '+', '-' or '='
	perm  string // letters from rwxXst
	copyf byte   // 'u', 'g' or 'o': copy that class's bits instead
}

// Bits each class letter owns, with its set-id or sticky bit.
var whoBits = map[byte]uint32{'u': 0o4700, 'g': 0o2070, 'o': 0o1007, 'a': 0o7777}

// ErrSyntax is wrapped by every error Parse returns, so callers can tell a
// bad mode from other failures whatever message they print.
var ErrSyntax = errors.New("invalid mode")

// Parse parses a chmod mode: an octal number up to 0o7777, or
// comma-separated symbolic clauses [ugoa...][+-=][rwxXst...|u|g|o]...
func Parse(s string) (Mode, error) {
	if s != "" && strings.Trim(s, "01234567") == "" {
		v, err := strconv.ParseUint(s, 8, 32)
		if err != nil || v > 0o7777 {
			return Mode{}, fmt.Errorf("%w %q: octal value out of range", ErrSyntax, s)
		}
		return Mode{octal: true, val: uint32(v), digits: len(s)}, nil
	}
	var m Mode
	for _, part := range strings.Split(s, ",") {
		c, err := parseClause(part)
		if err != nil {
			return Mode{}, fmt.Errorf("%w %q: %v", ErrSyntax, s, err)
		}
		m.clauses = append(m.clauses, c)
	}
	return m, nil
}

func parseClause(s string) (clause, error) {
	var c clause
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
			return c, fmt.Errorf("bad operator %q", op)
		}
		i++
		a := action{op: op}
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

// Octal reports whether m is an octal mode. Its result then does not
// depend on the old bits except for a directory's set-id bits, so callers
// that set a fixed mode can skip looking the old one up for files.
func (m Mode) Octal() bool { return m.octal }

// Apply returns the permission, set-id and sticky bits (within 0o7777)
// that m gives a file whose bits are old; isDir matters for X and for the
// set-id bits a directory keeps.
func (m Mode) Apply(old uint32, isDir bool) uint32 {
	if m.octal {
		if isDir && m.digits <= 4 {
			return m.val | old&0o6000
		}
		return m.val
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
	return cur
}

// bits is what one action adds, removes or sets, before the class mask.
func (a action) bits(cur uint32, isDir bool) uint32 {
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
