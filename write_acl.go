package btrfs

import (
	"encoding/binary"
	"syscall"

	"github.com/gobtrfs/btrfs/internal/disk"
)

// aclNames are the system. attributes Setxattr takes: POSIX ACLs.
var aclNames = map[string]bool{aclAccessName: true, aclDefaultName: true}

// The kernel's xattr form of a POSIX ACL: a little-endian u32 version (2),
// then entries of u16 tag, u16 permission bits, u32 id.
const (
	aclVersion   = 2
	aclHeader    = 4
	aclEntrySize = 8
)

// ACL entry tags, and the permission bits an entry may carry.
const (
	aclUserObj  = 0x01
	aclUser     = 0x02
	aclGroupObj = 0x04
	aclGroup    = 0x08
	aclMask     = 0x10
	aclOther    = 0x20
	aclPerms    = 0x07
)

// checkACL validates a POSIX ACL value as the kernel does before storing
// it (EINVAL when it would refuse it): the version, whole entries, known
// tags in the canonical order (owner, named users by ascending id, owning
// group, named groups by ascending id, mask, other) with permission bits
// only, the three owner/group/other entries exactly once, and a mask
// whenever named users or groups appear. An empty value is refused too
// (Removexattr takes an ACL away).
func checkACL(v []byte) error {
	if len(v) < aclHeader || (len(v)-aclHeader)%aclEntrySize != 0 ||
		binary.LittleEndian.Uint32(v) != aclVersion || len(v) == aclHeader {
		return syscall.EINVAL
	}
	seen := map[uint16]int{}
	var prevTag uint16
	var prevID uint32
	for off := aclHeader; off < len(v); off += aclEntrySize {
		tag := binary.LittleEndian.Uint16(v[off:])
		perm := binary.LittleEndian.Uint16(v[off+2:])
		id := binary.LittleEndian.Uint32(v[off+4:])
		if perm&^aclPerms != 0 || tag < prevTag {
			return syscall.EINVAL
		}
		if tag == prevTag && (tag != aclUser && tag != aclGroup || id <= prevID) {
			return syscall.EINVAL
		}
		prevTag, prevID = tag, id
		switch tag {
		case aclUserObj, aclUser, aclGroupObj, aclGroup, aclMask, aclOther:
			seen[tag]++
		default:
			return syscall.EINVAL
		}
	}
	if seen[aclUserObj] != 1 || seen[aclGroupObj] != 1 || seen[aclOther] != 1 || seen[aclMask] > 1 {
		return syscall.EINVAL
	}
	if (seen[aclUser] > 0 || seen[aclGroup] > 0) && seen[aclMask] == 0 {
		return syscall.EINVAL
	}
	return nil
}

// The xattr names of the two POSIX ACLs.
const (
	aclAccessName  = "system.posix_acl_access"
	aclDefaultName = "system.posix_acl_default"
)

// aclUndefinedID is the id of entries that name no user or group (owner,
// owning group, mask, other), as the kernel writes them.
const aclUndefinedID = 0xffffffff

// aclEntry is one entry of a POSIX ACL.
type aclEntry struct {
	tag, perm uint16
	id        uint32
}

// parseACL decodes a POSIX ACL checked as checkACL checks it.
func parseACL(v []byte) ([]aclEntry, error) {
	if err := checkACL(v); err != nil {
		return nil, err
	}
	es := make([]aclEntry, 0, (len(v)-aclHeader)/aclEntrySize)
	for off := aclHeader; off < len(v); off += aclEntrySize {
		es = append(es, aclEntry{tag: binary.LittleEndian.Uint16(v[off:]),
			perm: binary.LittleEndian.Uint16(v[off+2:]), id: binary.LittleEndian.Uint32(v[off+4:])})
	}
	return es, nil
}

// encodeACL is the xattr form of es, as the kernel stores it: the ids of
// entries that name nobody are aclUndefinedID whatever they were.
func encodeACL(es []aclEntry) []byte {
	v := make([]byte, aclHeader+aclEntrySize*len(es))
	binary.LittleEndian.PutUint32(v, aclVersion)
	for i, e := range es {
		off := aclHeader + i*aclEntrySize
		id := e.id
		if e.tag != aclUser && e.tag != aclGroup {
			id = aclUndefinedID
		}
		binary.LittleEndian.PutUint16(v[off:], e.tag)
		binary.LittleEndian.PutUint16(v[off+2:], e.perm)
		binary.LittleEndian.PutUint32(v[off+4:], id)
	}
	return v
}

// aclCreateMasq turns a copy of a directory's default ACL into the
// access ACL of a new inode created with mode, and mode into what the
// ACL allows, as Linux's posix_acl_create_masq does: the owner and other
// entries and the mask (the owning group's entry without one) keep only
// the permissions the mode's class grants, and the mode's classes only
// those the entries keep. Named entries stay as they are. It reports
// whether the ACL says more than the mode (named entries or a mask), so
// whether it is to be stored at all.
func aclCreateMasq(es []aclEntry, mode uint32) (uint32, bool) {
	m := mode
	extended := false
	var mask, group *aclEntry
	for i := range es {
		e := &es[i]
		switch e.tag {
		case aclUserObj:
			e.perm &= uint16(m>>6) & aclPerms
			m = m&^0o700 | m&(uint32(e.perm)<<6)
		case aclOther:
			e.perm &= uint16(m) & aclPerms
			m = m&^0o007 | m&uint32(e.perm)
		case aclGroupObj:
			group = e
		case aclMask:
			mask = e
			extended = true
		case aclUser, aclGroup:
			extended = true
		}
	}
	g := mask
	if g == nil {
		g = group // checkACL made sure there is one
	}
	g.perm &= uint16(m>>3) & aclPerms
	m = m&^0o070 | m&(uint32(g.perm)<<3)
	return mode&^0o777 | m&0o777, extended
}

// createACLs applies the default ACL of directory parent to the new inode
// in, as Linux does at creation (posix_acl_create): with one, in's mode
// keeps what the ACL allows, in gets it as its access ACL when it says
// more than the mode, and a new directory gets it as its own default ACL;
// without one, umask clears permission bits. Symlinks take neither. It
// returns the values to store, nil for none.
func (c *wctx) createACLs(parent, in *winode, umask uint32) (access, def []byte, err error) {
	if in.item.IsSymlink() {
		return nil, nil, nil
	}
	v, ok, err := c.xattrValue(parent.ino, aclDefaultName)
	if err != nil {
		return nil, nil, err
	}
	if !ok {
		in.item.Mode &^= umask & 0o777
		return nil, nil, nil
	}
	es, err := parseACL(v)
	if err != nil {
		k := disk.Key{ObjectID: parent.ino, Type: disk.XattrItemKey, Offset: disk.NameHash([]byte(aclDefaultName))}
		return nil, nil, &disk.CorruptError{Tree: c.tr.Owner(), Key: &k, What: "default ACL", Err: err}
	}
	if in.item.IsDir() {
		def = encodeACL(es)
	}
	mode, extended := aclCreateMasq(es, in.item.Mode)
	in.item.Mode = mode
	if extended {
		access = encodeACL(es)
	}
	return access, def, nil
}

// setNewXattr adds attribute attr with value to inode ino, made in this
// change (so it has no such attribute yet; another name may share the
// hash).
func (c *wctx) setNewXattr(ino disk.ObjectID, attr string, value []byte) error {
	k := disk.Key{ObjectID: ino, Type: disk.XattrItemKey, Offset: disk.NameHash([]byte(attr))}
	entries, err := c.xattrEntries(k)
	if err != nil {
		return err
	}
	entries = setEntry(entries, disk.DirItem{TransID: c.gen, Type: disk.FtXattr, Name: []byte(attr), Data: value})
	return c.replaceItem(k, entries)
}

// xattrEntries returns the entries of xattr item k (none when missing).
func (c *wctx) xattrEntries(k disk.Key) ([]disk.DirItem, error) {
	data, ok, err := c.tr.Lookup(c.tx, k)
	if err != nil || !ok {
		return nil, err
	}
	entries, err := disk.ParseDirItems(data)
	if err != nil {
		return nil, &disk.CorruptError{Tree: c.tr.Owner(), Key: &k, What: "xattr item", Err: err}
	}
	return entries, nil
}

// xattrValue returns attribute attr of inode ino of the current tree.
func (c *wctx) xattrValue(ino disk.ObjectID, attr string) ([]byte, bool, error) {
	k := disk.Key{ObjectID: ino, Type: disk.XattrItemKey, Offset: disk.NameHash([]byte(attr))}
	entries, err := c.xattrEntries(k)
	if err != nil {
		return nil, false, err
	}
	for _, e := range entries {
		if string(e.Name) == attr {
			return e.Data, true, nil
		}
	}
	return nil, false, nil
}
