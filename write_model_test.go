package btrfs_test

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gobtrfs/btrfs/internal/btrfstest"
	"golang.org/x/sys/unix"
)

// This file holds the model of the random write tests: what the
// filesystem should look like after a sequence of operations, and which
// errno each operation should fail with. The model knows nothing of
// btrfs; it is the POSIX view the kernel mount shows.

// Item layout facts the model needs to predict ENOSPC for xattrs: a leaf
// header, an item header and the fixed part of a DIR_ITEM (format doc).
const (
	leafHeaderSize = 101
	itemHeaderSize = 25
	dirItemBase    = 30
	nameMax        = 255
)

// emptySHA256 is the digest of no bytes, the content of an empty file.
var emptySHA256 = func() string { s := sha256.Sum256(nil); return hex.EncodeToString(s[:]) }()

// mNode is one inode of the model; hard links share the pointer.
type mNode struct {
	e          btrfstest.Entry // Type, Perm, UID, GID, MtimeNs, Size, SHA256, Data, Target, Rdev, Xattrs
	mtimeKnown bool            // MtimeNs was set explicitly (or read) and nothing changed it since
	hasData    bool            // file data: removing the last link may be EOPNOTSUPP for now
	kernel     bool            // made by the kernel: its names may live in INODE_EXTREF items
	links      int             // number of paths naming it
}

// model maps every path to its inode and keeps, for a deterministic
// random choice, the paths in a slice (order depends only on history).
type model struct {
	nodes      map[string]*mNode
	kids       map[string]map[string]bool // directory path -> child paths
	list       []string
	idx        map[string]int
	maxItem    int // largest item a leaf holds
	sectorSize int
}

// newModel returns a model holding only the root directory.
func newModel(nodesize int, root *mNode) *model {
	m := &model{nodes: map[string]*mNode{}, kids: map[string]map[string]bool{},
		idx: map[string]int{}, maxItem: nodesize - leafHeaderSize - itemHeaderSize, sectorSize: 4096}
	root.links = 1
	m.add(".", root)
	return m
}

// modelFromTree builds the model of a scanned tree (a kernel-made image).
// Every scanned fact is known, including mtimes.
func modelFromTree(nodesize int, t *btrfstest.Tree) *model {
	root := &mNode{e: *t.Entries["."], mtimeKnown: true, kernel: true}
	m := newModel(nodesize, root)
	byPath := map[string]*mNode{}
	for _, g := range t.Links {
		n := &mNode{e: *t.Entries[g[0]], mtimeKnown: true, kernel: true}
		for _, p := range g {
			byPath[p] = n
		}
	}
	for _, p := range t.Paths() { // parents before children
		if p == "." {
			continue
		}
		n := byPath[p]
		if n == nil {
			n = &mNode{e: *t.Entries[p], mtimeKnown: true, kernel: true}
		}
		n.hasData = n.e.Type == btrfstest.TypeRegular && n.e.Size > 0
		n.links++
		m.add(p, n)
	}
	return m
}

// clone returns a deep copy of m (hard links stay shared in the copy).
func (m *model) clone() *model {
	c := &model{nodes: map[string]*mNode{}, kids: map[string]map[string]bool{},
		list: append([]string(nil), m.list...), idx: map[string]int{},
		maxItem: m.maxItem, sectorSize: m.sectorSize}
	copies := map[*mNode]*mNode{}
	for p, n := range m.nodes {
		cn := copies[n]
		if cn == nil {
			cn = new(mNode)
			*cn = *n
			cn.e.Xattrs = maps.Clone(n.e.Xattrs)
			copies[n] = cn
		}
		c.nodes[p] = cn
	}
	for p, k := range m.kids {
		c.kids[p] = maps.Clone(k)
	}
	maps.Copy(c.idx, m.idx)
	return c
}

// add names n at p (the parent must be in the model).
func (m *model) add(p string, n *mNode) {
	m.nodes[p] = n
	m.idx[p] = len(m.list)
	m.list = append(m.list, p)
	if n.e.Type == btrfstest.TypeDir {
		m.kids[p] = map[string]bool{}
	}
	if p != "." {
		m.kids[parentDir(p)][p] = true
	}
}

// del drops the name p (not its children).
func (m *model) del(p string) {
	i := m.idx[p]
	last := m.list[len(m.list)-1]
	m.list[i] = last
	m.idx[last] = i
	m.list = m.list[:len(m.list)-1]
	delete(m.idx, p)
	delete(m.nodes, p)
	delete(m.kids, p)
	delete(m.kids[parentDir(p)], p)
}

// dirChanged records that entries of directory p were added or removed:
// the filesystem set its mtime to now, which the model cannot predict.
func (m *model) dirChanged(p string) {
	if n := m.nodes[p]; n != nil {
		n.mtimeKnown = false
	}
}

func parentDir(p string) string { return path.Dir(p) }

// lookup walks a physical path p (see physical) without following
// symlinks.
func (m *model) lookup(p string) (*mNode, error) {
	if !validName(p) {
		return nil, fs.ErrInvalid
	}
	if p == "." {
		return m.nodes["."], nil
	}
	cur := "."
	for _, c := range strings.Split(p, "/") {
		if m.nodes[cur].e.Type != btrfstest.TypeDir {
			return nil, syscall.ENOTDIR
		}
		cur = joinPath(cur, c)
		if m.nodes[cur] == nil {
			return nil, syscall.ENOENT
		}
	}
	return m.nodes[cur], nil
}

// parentFor checks the directory a new name p would go in.
func (m *model) parentFor(p string) (error, error) {
	if !validName(p) {
		return fs.ErrInvalid, nil
	}
	if p == "." {
		return syscall.EEXIST, nil
	}
	long := len(path.Base(p)) > nameMax
	if err := m.dirErr(parentDir(p)); err != nil {
		// Linux walks to the parent before it looks at the last name; the
		// write path checks the name's length first.
		if long {
			return err, syscall.ENAMETOOLONG
		}
		return err, nil
	}
	if long {
		return syscall.ENAMETOOLONG, nil
	}
	return nil, nil
}

// dirErr is the error of walking to directory p.
func (m *model) dirErr(p string) error {
	d, err := m.lookup(p)
	if err != nil {
		return err
	}
	if d.e.Type != btrfstest.TypeDir {
		return syscall.ENOTDIR
	}
	return nil
}

// validName is the write API's rule for a path: "." or slash-separated
// non-empty elements other than "." and ".." (any bytes, as on Linux).
func validName(p string) bool {
	if p == "." {
		return true
	}
	for _, e := range strings.Split(p, "/") {
		if e == "" || e == "." || e == ".." {
			return false
		}
	}
	return true
}

func joinPath(dir, name string) string {
	if dir == "." {
		return name
	}
	return dir + "/" + name
}

// newNode is a fresh inode made by our API: root-owned, no xattrs.
func newNode(typ btrfstest.FileType, perm uint32) *mNode {
	n := &mNode{e: btrfstest.Entry{Type: typ, Perm: perm}}
	if typ == btrfstest.TypeRegular {
		n.e.SHA256 = emptySHA256
	}
	return n
}

// create adds a new inode at p and marks the parent changed.
func (m *model) create(p string, n *mNode) {
	n.links = 1
	m.add(p, n)
	m.dirChanged(parentDir(p))
}

// unlink removes name p (a non-directory or an empty directory).
func (m *model) unlink(p string) {
	n := m.nodes[p]
	n.links--
	m.del(p)
	m.dirChanged(parentDir(p))
}

// subtree lists p and everything under it, parents first.
func (m *model) subtree(p string) []string {
	out := []string{p}
	for i := 0; i < len(out); i++ {
		for k := range m.kids[out[i]] {
			out = append(out, k)
		}
	}
	sort.Strings(out) // a deterministic order (a prefix sorts first: parents stay first)
	return out
}

// rename moves old (and its subtree) to new, replacing new if it exists.
func (m *model) rename(old, new string) {
	if m.nodes[new] != nil {
		m.unlink(new)
	}
	sub := m.subtree(old)
	nodes := make([]*mNode, len(sub))
	for i, p := range sub {
		nodes[i] = m.nodes[p]
	}
	for i := len(sub) - 1; i >= 0; i-- {
		m.del(sub[i])
	}
	for i, p := range sub {
		m.add(new+strings.TrimPrefix(p, old), nodes[i])
	}
	m.dirChanged(parentDir(old))
	m.dirChanged(parentDir(new))
}

// hasDataUnder reports whether removing the subtree at p would drop the
// last link of a file with data.
func (m *model) hasDataUnder(p string) bool {
	for _, q := range m.subtree(p) {
		if n := m.nodes[q]; n.hasData && n.links == 1 {
			return true
		}
	}
	return false
}

// tree renders the model as the btrfstest.Tree a scan should give. Times
// the model does not know are taken from got (the scan compared against),
// so only known times are compared.
//
// The kernel's view (kernel true) hides user. attributes of anything but
// files and directories, as Linux does (getxattr says ENODATA).
func (m *model) tree(got *btrfstest.Tree, kernel bool) *btrfstest.Tree {
	t := &btrfstest.Tree{Entries: map[string]*btrfstest.Entry{}}
	groups := map[*mNode][]string{}
	for _, p := range m.list {
		n := m.nodes[p]
		e := n.e
		e.Path = p
		e.Nlink = uint32(n.links)
		if !n.mtimeKnown {
			e.MtimeNs = 0
			if g := got.Entries[p]; g != nil {
				e.MtimeNs = g.MtimeNs
			}
		}
		if kernel && !userXattrsAllowed(e.Type) && len(e.Xattrs) > 0 {
			x := map[string]string{}
			for k, v := range e.Xattrs {
				if !strings.HasPrefix(k, "user.") {
					x[k] = v
				}
			}
			e.Xattrs = x
		}
		if len(e.Xattrs) == 0 {
			e.Xattrs = nil
		}
		t.Entries[p] = &e
		if e.Type != btrfstest.TypeDir {
			groups[n] = append(groups[n], p)
		}
	}
	for _, g := range groups {
		if len(g) > 1 {
			t.Links = append(t.Links, g)
		}
	}
	for _, g := range t.Links {
		sort.Strings(g) // Diff compares groups as sets; this only steadies output
	}
	return t
}

// errnoMatch reports whether got is the error want (nil matches nil).
func errnoMatch(got, want error) bool {
	if want == nil {
		return got == nil
	}
	var pe *fs.PathError
	var le *os.LinkError
	return (errors.As(got, &pe) || errors.As(got, &le)) && errors.Is(got, want)
}

// describeErr prints an error for the op log.
func describeErr(err error) string {
	if err == nil {
		return "ok"
	}
	return fmt.Sprint(err)
}

// rop is one random operation and its arguments.
type rop struct {
	kind         string
	a, b         string // path (and second path or symlink target)
	perm         fs.FileMode
	uid, gid     int
	dev          uint64
	attr         string
	value        []byte
	atime, mtime time.Time
}

func (o *rop) String() string {
	short := func(s string) string {
		if len(s) > 40 {
			return fmt.Sprintf("%q...(%d)", s[:40], len(s))
		}
		return strconv.Quote(s)
	}
	s := o.kind + "(" + short(o.a)
	switch o.kind {
	case "link", "rename", "symlink":
		s += ", " + short(o.b)
	case "mkdir", "create", "chmod", "mkdirall":
		s += fmt.Sprintf(", %v", o.perm)
	case "mknod":
		s += fmt.Sprintf(", %v, %#x", o.perm, o.dev)
	case "chown":
		s += fmt.Sprintf(", %d, %d", o.uid, o.gid)
	case "chtimes":
		s += ", " + o.mtime.Format(time.RFC3339Nano)
	case "setxattr":
		s += fmt.Sprintf(", %s, %d bytes", short(o.attr), len(o.value))
	case "removexattr":
		s += ", " + short(o.attr)
	}
	return s + ")"
}

// plan says what o should do on the model: the error it must fail with
// (nil: success), another error also accepted as long as nothing changes
// (EOPNOTSUPP for what the write path does not support yet, or a known
// divergence in the order of checks), and the change to apply on success.
func (m *model) plan(o *rop) (want, alt error, apply func()) {
	// The API checks its path arguments before anything else.
	if !validName(o.a) || (o.kind == "link" || o.kind == "rename") && !validName(o.b) {
		return fs.ErrInvalid, nil, nil
	}
	// Symlinks in the directory part of a path are followed, as Linux
	// and the write path follow them: the model works on the physical
	// path (the one without symlinks) from here on.
	// What is checked before any path is walked.
	if o.kind == "rename" && (o.a == "." || o.b == ".") {
		return syscall.EBUSY, nil, nil
	}
	if o.kind == "symlink" && (o.b == "" || len(o.b) >= 4096) {
		return m.planCreate(o)
	}
	if o.kind == "setxattr" || o.kind == "removexattr" {
		// The attribute's name and size are checked before the path.
		if len(o.attr) > nameMax {
			return syscall.ERANGE, nil, nil
		}
		if len(o.value) > 64<<10 {
			return syscall.E2BIG, nil, nil
		}
	}
	po := *o
	var err error
	if po.a, err = m.physical(o.a, o.kind == "mkdirall"); err != nil {
		if o.kind == "removeall" && errors.Is(err, syscall.ENOENT) {
			return nil, nil, func() {} // nothing there to remove, as os.RemoveAll
		}
		return m.walkFailed(o.a, err)
	}
	if o.kind == "link" || o.kind == "rename" {
		// Link finds its source whole before it walks the target's path;
		// rename walks both directories first (planRename).
		if o.kind == "link" {
			if _, err := m.lookup(po.a); err != nil {
				return err, nil, nil
			}
		}
		if po.b, err = m.physical(o.b, false); err != nil {
			return m.walkFailed(o.b, err)
		}
	}
	return m.planPhysical(&po)
}

// walkFailed is the outcome of an op whose path could not be walked:
// the walk's error; a last component that is too long may be reported
// first (the write path checks lengths before it walks, Linux after), and
// a too-long component on the way is ENOENT to the write path (no such
// entry) but ENAMETOOLONG to Linux.
func (m *model) walkFailed(p string, err error) (error, error, func()) {
	if len(path.Base(p)) > nameMax {
		return err, syscall.ENAMETOOLONG, nil
	}
	if errors.Is(err, syscall.ENOENT) {
		for _, c := range strings.Split(p, "/") {
			if len(c) > nameMax {
				return err, syscall.ENAMETOOLONG, nil
			}
		}
	}
	return err, nil, nil
}

// physical resolves the symlinks in the directory part of p (absolute
// targets from the root, ".." going up, at most 40 links: ELOOP) and
// returns the physical path; the last component is not followed. With
// all (MkdirAll), every existing component is followed, symlinks to
// directories included, and the walk stops at the first missing one:
// what is missing is appended as it is.
func (m *model) physical(p string, all bool) (string, error) {
	if p == "." {
		return p, nil
	}
	todo := strings.Split(p, "/")
	var last string
	if !all {
		last, todo = todo[len(todo)-1], todo[:len(todo)-1]
	}
	var stack []string // physical components from the root
	cur := func() string {
		if len(stack) == 0 {
			return "."
		}
		return strings.Join(stack, "/")
	}
	links := 0
	fromLink := 0 // how many of todo's first components a link target gave
	for len(todo) > 0 {
		c := todo[0]
		todo = todo[1:]
		linked := fromLink > 0 // c came from a link's target
		if linked {
			fromLink--
		}
		switch c {
		case "", ".":
			continue
		case "..":
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
			continue
		}
		if m.nodes[cur()].e.Type != btrfstest.TypeDir {
			return "", syscall.ENOTDIR
		}
		next := joinPath(cur(), c)
		n := m.nodes[next]
		if n == nil {
			if all && !linked {
				return strings.Join(append(append(stack, c), todo...), "/"), nil
			}
			return "", syscall.ENOENT // a dangling link, or a missing directory
		}
		if n.e.Type == btrfstest.TypeSymlink {
			if links++; links > 40 {
				return "", syscall.ELOOP
			}
			if strings.HasPrefix(n.e.Target, "/") {
				stack = nil
			}
			t := strings.Split(n.e.Target, "/")
			todo = append(t, todo...)
			fromLink = len(t) + fromLink
			continue
		}
		stack = append(stack, c)
	}
	if all {
		return cur(), nil
	}
	if m.nodes[cur()].e.Type != btrfstest.TypeDir {
		return "", syscall.ENOTDIR
	}
	return joinPath(cur(), last), nil
}

// planPhysical is plan for an op whose paths are physical.
func (m *model) planPhysical(o *rop) (want, alt error, apply func()) {
	switch o.kind {
	case "mkdir", "create", "symlink", "mknod":
		return m.planCreate(o)
	case "remove":
		return m.planRemove(o)
	case "chmod", "chtimes", "chown":
		n, err := m.lookup(o.a)
		if err != nil {
			return err, nil, nil
		}
		if o.kind == "chown" && (!validID(o.uid) || !validID(o.gid)) {
			return syscall.EINVAL, nil, nil
		}
		return nil, nil, func() { m.setAttr(o, n) }
	case "setxattr", "removexattr":
		return m.planXattr(o)
	case "link":
		return m.planLink(o)
	case "rename":
		return m.planRename(o)
	case "mkdirall":
		return m.planMkdirAll(o)
	case "removeall":
		return m.planRemoveAll(o)
	}
	panic("unknown op " + o.kind)
}

func (m *model) setAttr(o *rop, n *mNode) {
	switch o.kind {
	case "chmod":
		n.e.Perm = linuxPermOf(o.perm)
	case "chtimes":
		n.e.MtimeNs, n.mtimeKnown = o.mtime.UnixNano(), true
	case "chown":
		if o.uid != -1 {
			n.e.UID = uint32(o.uid)
		}
		if o.gid != -1 {
			n.e.GID = uint32(o.gid)
		}
		if n.e.Type != btrfstest.TypeDir { // as Linux, also for root
			n.e.Perm &^= 0o4000
			if n.e.Perm&0o010 != 0 {
				n.e.Perm &^= 0o2000
			}
			delete(n.e.Xattrs, "security.capability")
		}
	}
}

// linuxPermOf converts the permission, set-id and sticky bits.
func linuxPermOf(p fs.FileMode) uint32 {
	v := uint32(p.Perm())
	if p&fs.ModeSetuid != 0 {
		v |= 0o4000
	}
	if p&fs.ModeSetgid != 0 {
		v |= 0o2000
	}
	if p&fs.ModeSticky != 0 {
		v |= 0o1000
	}
	return v
}

// validID is a user or group id chown takes: -1 (keep) or 32 bits but
// not (uid_t)-1.
func validID(id int) bool { return id == -1 || id >= 0 && id < 1<<32-1 }

func (m *model) planCreate(o *rop) (error, error, func()) {
	if o.kind == "symlink" && (o.b == "" || len(o.b) >= 4096) {
		if o.b == "" {
			return syscall.ENOENT, nil, nil
		}
		return syscall.ENAMETOOLONG, nil, nil
	}
	if err, alt := m.parentFor(o.a); err != nil {
		return err, alt, nil
	}
	if m.nodes[o.a] != nil {
		return syscall.EEXIST, nil, nil
	}
	// An inline extent holds the target: at most a sector less one byte,
	// and what one leaf item holds after the 21-byte extent header.
	if o.kind == "symlink" && len(o.b) > min(m.sectorSize-1, m.maxItem-21) {
		return syscall.ENAMETOOLONG, nil, nil
	}
	var n *mNode
	switch o.kind {
	case "mkdir":
		n = newNode(btrfstest.TypeDir, linuxPermOf(o.perm))
	case "create":
		n = newNode(btrfstest.TypeRegular, linuxPermOf(o.perm))
	case "symlink":
		n = newNode(btrfstest.TypeSymlink, 0o777)
		n.e.Target, n.e.Size = o.b, int64(len(o.b))
	case "mknod":
		n = newNode(nodeType(o.perm), linuxPermOf(o.perm))
		if n.e.Type == btrfstest.TypeCharDev || n.e.Type == btrfstest.TypeBlockDev {
			n.e.RdevMajor, n.e.RdevMinor = unix.Major(o.dev), unix.Minor(o.dev)
		}
	}
	m.inherit(parentDir(o.a), n)
	return nil, nil, func() { m.create(o.a, n) }
}

// inherit gives a new node n what Linux gives it from its directory dir:
// the group and (for a directory) the set-group-ID bit of a set-group-ID
// directory, and the directory's default POSIX ACL, which masks the mode
// and becomes the access ACL (when it says more than the mode) and a
// directory's default ACL, as posix_acl_create does. The model's own
// reading of the kernel's rules, not the write path's code.
func (m *model) inherit(dir string, n *mNode) {
	d := m.nodes[dir]
	if d.e.Perm&0o2000 != 0 {
		n.e.GID = d.e.GID
		if n.e.Type == btrfstest.TypeDir {
			n.e.Perm |= 0o2000
		}
	}
	def := d.e.Xattrs["system.posix_acl_default"]
	if def == "" || n.e.Type == btrfstest.TypeSymlink {
		return
	}
	type entry struct {
		tag, perm uint16
		id        uint32
	}
	var es []entry
	for off := 4; off+8 <= len(def); off += 8 {
		b := []byte(def[off : off+8])
		es = append(es, entry{binary.LittleEndian.Uint16(b), binary.LittleEndian.Uint16(b[2:]), binary.LittleEndian.Uint32(b[4:])})
	}
	encode := func() string {
		b := binary.LittleEndian.AppendUint32(nil, 2)
		for _, e := range es {
			id := e.id
			if e.tag != 0x02 && e.tag != 0x08 {
				id = 0xffffffff
			}
			b = binary.LittleEndian.AppendUint16(b, e.tag)
			b = binary.LittleEndian.AppendUint16(b, e.perm)
			b = binary.LittleEndian.AppendUint32(b, id)
		}
		return string(b)
	}
	if n.e.Xattrs == nil {
		n.e.Xattrs = map[string]string{}
	}
	if n.e.Type == btrfstest.TypeDir {
		n.e.Xattrs["system.posix_acl_default"] = encode()
	}
	// Each class of the mode and the entry that stands for it keep the
	// bits both grant: owner, other, and the mask (or, without one, the
	// owning group).
	owner, other, group := 6, 0, 3
	mode := n.e.Perm
	class := func(e *entry, shift int) {
		e.perm &= uint16(mode>>shift) & 7
		mode = mode&^(7<<shift) | mode&(uint32(e.perm)<<shift)
	}
	extended := false
	var groupObj, mask *entry
	for i := range es {
		switch es[i].tag {
		case 0x01:
			class(&es[i], owner)
		case 0x20:
			class(&es[i], other)
		case 0x04:
			groupObj = &es[i]
		case 0x10:
			mask = &es[i]
			extended = true
		default:
			extended = true
		}
	}
	if mask == nil {
		mask = groupObj
	}
	class(mask, group)
	n.e.Perm = mode
	if extended {
		n.e.Xattrs["system.posix_acl_access"] = encode()
	}
}

// nodeType is the file type an fs.FileMode given to Mknod asks for.
func nodeType(p fs.FileMode) btrfstest.FileType {
	switch {
	case p&fs.ModeNamedPipe != 0:
		return btrfstest.TypeFifo
	case p&fs.ModeSocket != 0:
		return btrfstest.TypeSocket
	case p&fs.ModeCharDevice != 0:
		return btrfstest.TypeCharDev
	}
	return btrfstest.TypeBlockDev
}

func (m *model) planRemove(o *rop) (error, error, func()) {
	if o.a == "." {
		return syscall.EBUSY, nil, nil
	}
	n, err := m.lookup(o.a)
	if err != nil {
		return err, nil, nil
	}
	if n.e.Type == btrfstest.TypeDir && len(m.kids[o.a]) > 0 {
		return syscall.ENOTEMPTY, nil, nil
	}
	var alt error
	if n.hasData && n.links == 1 || n.kernel && n.links > 1 {
		// Removing data, or a name the kernel may keep in an INODE_EXTREF,
		// may not be supported yet.
		alt = syscall.EOPNOTSUPP
	}
	return nil, alt, func() { m.unlink(o.a) }
}

func (m *model) planXattr(o *rop) (error, error, func()) {
	if len(o.attr) > nameMax {
		return syscall.ERANGE, nil, nil
	}
	if len(o.value) > 64<<10 {
		return syscall.E2BIG, nil, nil
	}
	// Then, as Linux: the path, user. only on files and directories, the
	// namespace, the size.
	n, err := m.lookup(o.a)
	if err != nil {
		return err, nil, nil
	}
	if strings.HasPrefix(o.attr, "user.") && !userXattrsAllowed(n.e.Type) {
		return syscall.EPERM, nil, nil
	}
	if attrErr := m.attrError(o); attrErr != nil {
		return attrErr, nil, nil
	}
	return m.planXattrOn(o, n)
}

// errAlsoOK as plan's alt error accepts success too (and applies it).
var errAlsoOK = errors.New("success also accepted")

// userXattrsAllowed reports whether Linux lets user. attributes on a type.
func userXattrsAllowed(t btrfstest.FileType) bool {
	return t == btrfstest.TypeRegular || t == btrfstest.TypeDir
}

// planXattrOn plans an xattr change on an inode found and a valid name.
func (m *model) planXattrOn(o *rop, n *mNode) (error, error, func()) {
	if o.kind == "removexattr" {
		if _, ok := n.e.Xattrs[o.attr]; !ok {
			return errNoData, nil, nil
		}
		return nil, nil, func() { delete(n.e.Xattrs, o.attr) }
	}
	if m.bucketFull(o, n) {
		return syscall.ENOSPC, nil, nil
	}
	return nil, nil, func() {
		if n.e.Xattrs == nil {
			n.e.Xattrs = map[string]string{}
		}
		n.e.Xattrs[o.attr] = string(o.value)
	}
}

// attrError is what setxattr says of a name and value on any inode.
func (m *model) attrError(o *rop) error {
	ok := false
	for _, p := range []string{"user.", "trusted.", "security."} {
		ok = ok || strings.HasPrefix(o.attr, p) && len(o.attr) > len(p)
	}
	if !ok {
		return syscall.EOPNOTSUPP
	}
	if o.kind == "setxattr" && dirItemBase+len(o.attr)+len(o.value) > m.maxItem {
		return syscall.ENOSPC
	}
	return nil
}

// bucketFull reports whether setting o.attr on n overflows its XATTR_ITEM:
// attributes whose names hash alike share one item.
func (m *model) bucketFull(o *rop, n *mNode) bool {
	h := nameHash(o.attr)
	size := dirItemBase + len(o.attr) + len(o.value)
	for k, v := range n.e.Xattrs {
		if k != o.attr && nameHash(k) == h {
			size += dirItemBase + len(k) + len(v)
		}
	}
	return size > m.maxItem
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// nameHash is the btrfs name hash, crc32c seeded with ~1 and not
// inverted at the end.
func nameHash(name string) uint32 { return ^crc32.Update(1, castagnoli, []byte(name)) }

// hashTwins returns pairs of distinct names, prefix and ten random
// letters or digits, with one name hash: the birthday bound finds a few
// among a million (a fixed stream, so the names are always the same;
// names differing only in digits never collide, CRC being linear).
func hashTwins(prefix string, want int) [][2]string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	r := rand.New(rand.NewPCG(1, 2))
	seen := make(map[uint32]string)
	var out [][2]string
	b := make([]byte, 10)
	for i := 0; i < 1<<21 && len(out) < want; i++ {
		for j := range b {
			b[j] = alphabet[r.IntN(len(alphabet))]
		}
		s := prefix + string(b)
		h := nameHash(s)
		if prev, ok := seen[h]; ok && prev != s {
			out = append(out, [2]string{prev, s})
		}
		seen[h] = s
	}
	return out
}

func (m *model) planLink(o *rop) (error, error, func()) {
	if !validName(o.b) {
		return fs.ErrInvalid, nil, nil
	}
	n, err := m.lookup(o.a)
	if err != nil {
		return err, nil, nil
	}
	if err, alt := m.parentFor(o.b); err != nil {
		return err, alt, nil
	}
	if m.nodes[o.b] != nil {
		return syscall.EEXIST, nil, nil
	}
	if n.e.Type == btrfstest.TypeDir {
		return syscall.EPERM, nil, nil
	}
	return nil, nil, func() {
		n.links++
		m.add(o.b, n)
		m.dirChanged(parentDir(o.b))
	}
}

func (m *model) planRename(o *rop) (error, error, func()) {
	if !validName(o.a) || !validName(o.b) {
		return fs.ErrInvalid, nil, nil
	}
	if o.a == "." || o.b == "." {
		return syscall.EBUSY, nil, nil
	}
	// Linux: both parents first, then the source, then the new name.
	if err := m.dirErr(parentDir(o.a)); err != nil {
		return err, nil, nil
	}
	if err := m.dirErr(parentDir(o.b)); err != nil {
		return err, nil, nil
	}
	long := len(path.Base(o.b)) > nameMax
	n := m.nodes[o.a]
	if n == nil {
		if long {
			return syscall.ENOENT, syscall.ENAMETOOLONG, nil
		}
		return syscall.ENOENT, nil, nil
	}
	if long {
		return syscall.ENAMETOOLONG, nil, nil
	}
	switch {
	case strings.HasPrefix(o.b, o.a+"/"):
		return syscall.EINVAL, nil, nil
	case strings.HasPrefix(o.a, o.b+"/"):
		return syscall.ENOTEMPTY, nil, nil
	}
	t := m.nodes[o.b]
	if o.a == o.b || t == n {
		return nil, nil, func() {}
	}
	var alt error
	if n.kernel && n.links > 1 {
		alt = syscall.EOPNOTSUPP
	}
	if t != nil {
		switch {
		case n.e.Type == btrfstest.TypeDir && t.e.Type != btrfstest.TypeDir:
			return syscall.ENOTDIR, nil, nil
		case n.e.Type != btrfstest.TypeDir && t.e.Type == btrfstest.TypeDir:
			return syscall.EISDIR, nil, nil
		case len(m.kids[o.b]) > 0:
			return syscall.ENOTEMPTY, nil, nil
		}
		if t.hasData && t.links == 1 || t.kernel && t.links > 1 {
			alt = syscall.EOPNOTSUPP
		}
	}
	return nil, alt, func() { m.rename(o.a, o.b) }
}

func (m *model) planMkdirAll(o *rop) (error, error, func()) {
	if !validName(o.a) {
		return fs.ErrInvalid, nil, nil
	}
	var missing []string // once one component is missing, so is the rest
	if o.a != "." {
		cur := "."
		for _, c := range strings.Split(o.a, "/") {
			next := joinPath(cur, c)
			switch {
			case len(c) > nameMax:
				return syscall.ENAMETOOLONG, nil, nil
			case len(missing) > 0:
				missing = append(missing, next)
			case m.nodes[cur].e.Type != btrfstest.TypeDir:
				return syscall.ENOTDIR, nil, nil
			case m.nodes[next] == nil:
				missing = append(missing, next)
			}
			cur = next
		}
	}
	if len(missing) == 0 && m.nodes[o.a].e.Type != btrfstest.TypeDir {
		return syscall.ENOTDIR, nil, nil
	}
	return nil, nil, func() {
		for _, p := range missing {
			n := newNode(btrfstest.TypeDir, linuxPermOf(o.perm))
			m.inherit(parentDir(p), n)
			m.create(p, n)
		}
	}
}

func (m *model) planRemoveAll(o *rop) (error, error, func()) {
	if !validName(o.a) {
		return fs.ErrInvalid, nil, nil
	}
	_, err := m.lookup(o.a)
	if errors.Is(err, syscall.ENOENT) && m.nodes[parentDir(o.a)] != nil {
		return nil, nil, func() {}
	}
	if err != nil {
		return err, nil, nil
	}
	if o.a == "." {
		return syscall.EINVAL, nil, nil
	}
	var alt error
	if m.hasDataUnder(o.a) {
		alt = syscall.EOPNOTSUPP // removing data may not be supported yet
	}
	return nil, alt, func() {
		sub := m.subtree(o.a)
		for i := len(sub) - 1; i >= 0; i-- {
			m.unlink(sub[i])
		}
	}
}
