package btrfstest

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
)

// manifestHeader is the first line of every manifest; the number is the
// format version, bumped on any incompatible change.
const manifestHeader = "gobtrfs-manifest 1"

// maxManifestLine bounds one manifest line (a 4 KiB binary xattr value
// quotes to at most 16 KiB; directories of many hardlinks make long link
// lines), so a hostile file cannot make Parse buffer without limit.
const maxManifestLine = 4 << 20

// The manifest is a line-oriented text format, stable and diffable, that
// records a Tree exactly, including names and values that are not valid
// UTF-8. Every string is a Go quoted string (strconv.Quote). Lines:
//
//	gobtrfs-manifest 1
//	# comment
//	"path" TYPE ino=N perm=0755 uid=N gid=N nlink=N size=N mtime=NS [type fields]
//		xattr "name" "value"
//	link "path" "path" ...
//
// Type fields: dir: placeholder=1 (only if set); file: sha256=HEX data=OFF+LEN,OFF+LEN (data= may be empty);
// symlink: target="..."; chr, blk: rdev=MAJOR:MINOR. Entries are sorted by
// path, xattr lines (tab-indented, belonging to the entry above) by name,
// link lines follow the entries in Tree.Links order.

// WriteTo writes the tree in the manifest format. It implements io.WriterTo.
func (t *Tree) WriteTo(w io.Writer) (int64, error) {
	var b bytes.Buffer
	b.WriteString(manifestHeader + "\n")
	for _, p := range t.Paths() {
		writeEntry(&b, t.Entries[p])
	}
	for _, g := range t.Links {
		b.WriteString("link")
		for _, p := range g {
			b.WriteString(" " + strconv.Quote(p))
		}
		b.WriteByte('\n')
	}
	return b.WriteTo(w)
}

// writeEntry writes one entry line and its xattr lines.
func writeEntry(b *bytes.Buffer, e *Entry) {
	fmt.Fprintf(b, "%s %s ino=%d perm=%04o uid=%d gid=%d nlink=%d size=%d mtime=%d",
		strconv.Quote(e.Path), e.Type, e.Ino, e.Perm, e.UID, e.GID, e.Nlink, e.Size, e.MtimeNs)
	switch e.Type {
	case TypeDir:
		if e.Placeholder {
			b.WriteString(" placeholder=1")
		}
	case TypeRegular:
		r := fmtRanges(e.Data)
		fmt.Fprintf(b, " sha256=%s data=%s", e.SHA256, r[1:len(r)-1])
	case TypeSymlink:
		fmt.Fprintf(b, " target=%s", strconv.Quote(e.Target))
	case TypeCharDev, TypeBlockDev:
		fmt.Fprintf(b, " rdev=%d:%d", e.RdevMajor, e.RdevMinor)
	}
	b.WriteByte('\n')
	names := make([]string, 0, len(e.Xattrs))
	for n := range e.Xattrs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(b, "\txattr %s %s\n", strconv.Quote(n), strconv.Quote(e.Xattrs[n]))
	}
}

// Save writes the tree as a manifest file.
func (t *Tree) Save(path string) error {
	var b bytes.Buffer
	if _, err := t.WriteTo(&b); err != nil {
		return err
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}

// Load reads a manifest file (see Parse).
func Load(path string) (*Tree, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	t, err := Parse(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// Parse reads a manifest written by Tree.WriteTo. It validates what it
// reads (clean relative paths, known types and fields, no duplicates, links
// naming existing non-directories) and returns an error naming the line
// for anything else; it never panics on malformed input.
func Parse(r io.Reader) (*Tree, error) {
	p := &manifestParser{tree: &Tree{Entries: map[string]*Entry{}}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxManifestLine)
	for sc.Scan() {
		p.line++
		if err := p.parseLine(sc.Text()); err != nil {
			return nil, fmt.Errorf("manifest line %d: %w", p.line, err)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("manifest line %d: %w", p.line+1, err)
	}
	if !p.header {
		return nil, fmt.Errorf("manifest: missing %q header", manifestHeader)
	}
	if err := p.checkLinks(); err != nil {
		return nil, err
	}
	return p.tree, nil
}
