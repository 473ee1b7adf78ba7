package btrfs

import (
	"encoding/binary"
	"syscall"
)

// aclNames are the system. attributes Setxattr takes: POSIX ACLs.
var aclNames = map[string]bool{"system.posix_acl_access": true, "system.posix_acl_default": true}

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
