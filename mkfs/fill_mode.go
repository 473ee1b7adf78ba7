package mkfs

import (
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// mkdev encodes a device number for btrfs.FS.Mknod, which takes the
// userspace dev_t encoding (as mknod(2) and stat(2) use it).
func mkdev(major, minor uint32) uint64 { return unix.Mkdev(major, minor) }

// chmodClause is one comma-separated part of a --chmod spec.
type chmodClause struct {
	only  byte   // 'D' (directories), 'F' (everything else) or 0
	octal bool   // set the bits to val
	val   uint32 // octal value
	who   uint32 // mask of the affected bits for symbolic clauses
	ops   []chmodOp
}

type chmodOp struct {
	op    byte // '+', '-', '='
	perms string
}

// ParseChmod parses a mode override in the notation of rsync's --chmod:
// comma-separated clauses, each either octal ("644") or symbolic as in
// chmod(1) ("u+rwX,go-w", "a=rX"), optionally prefixed with D (applies to
// directories only) or F (to everything else). X sets execute for
// directories and for entries that already have an execute bit. Symbolic
// clauses without u/g/o/a apply to all three (no umask is applied).
// The returned function maps an entry's mode bits.
func ParseChmod(spec string) (func(k Kind, perm uint32) uint32, error) {
	var clauses []chmodClause
	for _, raw := range strings.Split(spec, ",") {
		c, err := parseChmodClause(raw)
		if err != nil {
			return nil, err
		}
		clauses = append(clauses, c)
	}
	return func(k Kind, perm uint32) uint32 {
		for _, c := range clauses {
			perm = c.apply(k, perm)
		}
		return perm
	}, nil
}

// parseChmodOption parses BuildOptions.Chmod; "" is no override.
func parseChmodOption(spec string) (func(Kind, uint32) uint32, error) {
	if spec == "" {
		return nil, nil
	}
	return ParseChmod(spec)
}

func parseChmodClause(raw string) (chmodClause, error) {
	var c chmodClause
	s := raw
	if s != "" && (s[0] == 'D' || s[0] == 'F') {
		c.only, s = s[0], s[1:]
	}
	bad := func() (chmodClause, error) { return c, fmt.Errorf("mkfs: bad chmod clause %q", raw) }
	if s == "" {
		return bad()
	}
	if s[0] >= '0' && s[0] <= '7' {
		v, err := strconv.ParseUint(s, 8, 32)
		if err != nil || v > 0o7777 {
			return bad()
		}
		c.octal, c.val = true, uint32(v)
		return c, nil
	}
	for s != "" && strings.IndexByte("ugoa", s[0]) >= 0 {
		c.who |= map[byte]uint32{'u': 0o4700, 'g': 0o2070, 'o': 0o1007, 'a': 0o7777}[s[0]]
		s = s[1:]
	}
	if c.who == 0 {
		c.who = 0o7777
	}
	for s != "" {
		if strings.IndexByte("+-=", s[0]) < 0 {
			return bad()
		}
		op := chmodOp{op: s[0]}
		s = s[1:]
		n := 0
		for n < len(s) && strings.IndexByte("rwxXst", s[n]) >= 0 {
			n++
		}
		op.perms, s = s[:n], s[n:]
		c.ops = append(c.ops, op)
	}
	if len(c.ops) == 0 {
		return bad()
	}
	return c, nil
}

// apply maps perm of an entry of kind k through the clause.
func (c chmodClause) apply(k Kind, perm uint32) uint32 {
	if c.only == 'D' && k != KindDir || c.only == 'F' && k == KindDir {
		return perm
	}
	if c.octal {
		return c.val
	}
	for _, op := range c.ops {
		var bits uint32
		for i := 0; i < len(op.perms); i++ {
			switch op.perms[i] {
			case 'r':
				bits |= 0o444
			case 'w':
				bits |= 0o222
			case 'x':
				bits |= 0o111
			case 'X':
				if k == KindDir || perm&0o111 != 0 {
					bits |= 0o111
				}
			case 's':
				bits |= 0o6000
			case 't':
				bits |= 0o1000
			}
		}
		bits &= c.who
		switch op.op {
		case '+':
			perm |= bits
		case '-':
			perm &^= bits
		case '=':
			perm = perm&^c.who | bits
		}
	}
	return perm
}
