package btrfstest

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// manifestParser is the state of one Parse.
type manifestParser struct {
	tree   *Tree
	line   int
	header bool
	last   *Entry // entry that xattr lines attach to
	inLink map[string]bool
}

// token is one lexical element of a manifest line: a bare word, a quoted
// string, or key=value where value is bare or quoted.
type token struct {
	key, val string
	quoted   bool
}

// lexLine splits a line into tokens separated by single spaces.
func lexLine(s string) ([]token, error) {
	var out []token
	for len(s) > 0 {
		var t token
		if s[0] != '"' {
			i := strings.IndexAny(s, " =\"")
			if i < 0 {
				out = append(out, token{val: s})
				return out, nil
			}
			if s[i] == '"' {
				return nil, fmt.Errorf("unexpected quote in %q", s)
			}
			if s[i] == ' ' {
				t.val, s = s[:i], s[i:]
			} else {
				t.key, s = s[:i], s[i+1:]
				if t.key == "" {
					return nil, errors.New("field with empty key")
				}
			}
		}
		if t.val == "" && len(s) > 0 && s[0] == '"' {
			q, err := strconv.QuotedPrefix(s)
			if err != nil {
				return nil, fmt.Errorf("bad quoted string at %.20q", s)
			}
			if t.val, err = strconv.Unquote(q); err != nil {
				return nil, err
			}
			t.quoted, s = true, s[len(q):]
		} else if t.key != "" {
			i := strings.IndexByte(s, ' ')
			if i < 0 {
				i = len(s)
			}
			t.val, s = s[:i], s[i:]
		}
		out = append(out, t)
		if len(s) > 0 {
			if s[0] != ' ' || len(s) == 1 {
				return nil, fmt.Errorf("want a single space between fields at %.20q", s)
			}
			s = s[1:]
		}
	}
	return out, nil
}

// parseLine dispatches on the kind of line.
func (p *manifestParser) parseLine(s string) error {
	switch {
	case !p.header:
		if s != manifestHeader {
			return fmt.Errorf("want header %q, got %.40q", manifestHeader, s)
		}
		p.header = true
		return nil
	case s == "" || strings.HasPrefix(s, "#"):
		return nil
	case strings.HasPrefix(s, "\txattr "):
		return p.parseXattr(s[1:])
	case strings.HasPrefix(s, "link "):
		return p.parseLink(s)
	case strings.HasPrefix(s, `"`):
		return p.parseEntry(s)
	}
	return fmt.Errorf("unrecognized line %.40q", s)
}

// parseXattr adds one xattr to the entry of the previous entry line.
func (p *manifestParser) parseXattr(s string) error {
	toks, err := lexLine(s)
	if err != nil {
		return err
	}
	if len(toks) != 3 || !toks[1].quoted || !toks[2].quoted {
		return errors.New(`want: xattr "name" "value"`)
	}
	if p.last == nil {
		return errors.New("xattr before any entry")
	}
	name := toks[1].val
	if name == "" || strings.IndexByte(name, 0) >= 0 {
		return fmt.Errorf("bad xattr name %q", name)
	}
	if _, dup := p.last.Xattrs[name]; dup {
		return fmt.Errorf("duplicate xattr %q", name)
	}
	if p.last.Xattrs == nil {
		p.last.Xattrs = map[string]string{}
	}
	p.last.Xattrs[name] = toks[2].val
	return nil
}

// parseLink records one hardlink group.
func (p *manifestParser) parseLink(s string) error {
	toks, err := lexLine(s)
	if err != nil {
		return err
	}
	if len(toks) < 3 {
		return errors.New("link group needs at least two paths")
	}
	if p.inLink == nil {
		p.inLink = map[string]bool{}
	}
	g := make([]string, 0, len(toks)-1)
	for _, t := range toks[1:] {
		if !t.quoted {
			return fmt.Errorf("link path %q not quoted", t.val)
		}
		if p.inLink[t.val] {
			return fmt.Errorf("path %q in two link groups", t.val)
		}
		p.inLink[t.val] = true
		g = append(g, t.val)
	}
	p.tree.Links = append(p.tree.Links, g)
	p.last = nil
	return nil
}

// checkLinks validates the link groups once all entries are known, and
// brings them into canonical order.
func (p *manifestParser) checkLinks() error {
	for _, g := range p.tree.Links {
		for _, path := range g {
			e := p.tree.Entries[path]
			if e == nil || e.Type == TypeDir {
				return fmt.Errorf("manifest: link group names %q, which is not a non-directory entry", path)
			}
		}
	}
	p.tree.sortLinks()
	return nil
}

// parseEntry parses an entry line.
func (p *manifestParser) parseEntry(s string) error {
	toks, err := lexLine(s)
	if err != nil {
		return err
	}
	if len(toks) < 2 || !toks[0].quoted || toks[1].key != "" || toks[1].quoted {
		return errors.New(`want: "path" TYPE key=value...`)
	}
	e := &Entry{Path: toks[0].val}
	if !validRel(e.Path) {
		return fmt.Errorf("path %q is not a clean relative path", e.Path)
	}
	if _, dup := p.tree.Entries[e.Path]; dup {
		return fmt.Errorf("duplicate path %q", e.Path)
	}
	var ok bool
	if e.Type, ok = parseFileType(toks[1].val); !ok {
		return fmt.Errorf("unknown type %q", toks[1].val)
	}
	seen := map[string]bool{}
	for _, t := range toks[2:] {
		if t.key == "" {
			return fmt.Errorf("stray field %q", t.val)
		}
		if seen[t.key] {
			return fmt.Errorf("duplicate field %q", t.key)
		}
		seen[t.key] = true
		if err := e.setField(t); err != nil {
			return fmt.Errorf("field %s: %w", t.key, err)
		}
	}
	if e.Type == TypeRegular && !seen["sha256"] {
		return errors.New("file entry without sha256")
	}
	p.tree.Entries[e.Path] = e
	p.last = e
	return nil
}

// setField sets one key=value field, refusing fields that do not belong to
// the entry's type (so that every accepted manifest writes back unchanged).
func (e *Entry) setField(t token) error {
	if t.quoted != (t.key == "target") {
		return errors.New("wrong quoting")
	}
	var err error
	switch t.key {
	case "ino":
		e.Ino, err = strconv.ParseUint(t.val, 10, 64)
	case "perm":
		var v uint64
		v, err = strconv.ParseUint(t.val, 8, 12)
		e.Perm = uint32(v)
	case "uid":
		e.UID, err = parseU32(t.val)
	case "gid":
		e.GID, err = parseU32(t.val)
	case "nlink":
		e.Nlink, err = parseU32(t.val)
	case "size":
		e.Size, err = strconv.ParseInt(t.val, 10, 64)
	case "mtime":
		e.MtimeNs, err = strconv.ParseInt(t.val, 10, 64)
	case "sha256", "data", "target", "rdev", "placeholder":
		err = e.setTypeField(t)
	default:
		err = errors.New("unknown field")
	}
	return err
}

// setTypeField handles the fields that only some types carry.
func (e *Entry) setTypeField(t token) error {
	var err error
	switch {
	case t.key == "sha256" && e.Type == TypeRegular:
		if len(t.val) != 64 || strings.Trim(t.val, "0123456789abcdef") != "" {
			return errors.New("want 64 lowercase hex digits")
		}
		e.SHA256 = t.val
	case t.key == "data" && e.Type == TypeRegular:
		e.Data, err = parseRanges(t.val)
	case t.key == "placeholder" && e.Type == TypeDir:
		if t.val != "1" {
			return errors.New("want placeholder=1")
		}
		e.Placeholder = true
	case t.key == "target" && e.Type == TypeSymlink:
		e.Target = t.val
	case t.key == "rdev" && (e.Type == TypeCharDev || e.Type == TypeBlockDev):
		maj, min, ok := strings.Cut(t.val, ":")
		if !ok {
			return errors.New("want MAJOR:MINOR")
		}
		if e.RdevMajor, err = parseU32(maj); err == nil {
			e.RdevMinor, err = parseU32(min)
		}
	default:
		return fmt.Errorf("not valid for type %s", e.Type)
	}
	return err
}

// parseRanges parses "off+len,off+len"; ranges must be non-empty, ordered
// and disjoint, as SEEK_DATA/SEEK_HOLE produce them.
func parseRanges(s string) ([]Range, error) {
	if s == "" {
		return nil, nil
	}
	var out []Range
	end := int64(0)
	for _, part := range strings.Split(s, ",") {
		o, l, ok := strings.Cut(part, "+")
		if !ok {
			return nil, fmt.Errorf("range %q: want OFF+LEN", part)
		}
		off, err1 := strconv.ParseInt(o, 10, 64)
		n, err2 := strconv.ParseInt(l, 10, 64)
		if err1 != nil || err2 != nil || off < end || n <= 0 || off > (1<<62) || n > (1<<62) {
			return nil, fmt.Errorf("range %q: invalid or out of order", part)
		}
		out = append(out, Range{Off: off, Len: n})
		end = off + n
	}
	return out, nil
}

func parseU32(s string) (uint32, error) {
	v, err := strconv.ParseUint(s, 10, 32)
	return uint32(v), err
}
