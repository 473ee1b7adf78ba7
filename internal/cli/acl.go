package cli

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os/user"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// POSIX ACLs as acl's getfacl and setfacl see them: entries of the
// kernel's xattr form (system.posix_acl_access and _default), their text
// form, and the mode an access ACL gives a file.

const (
	aclAccessXattr  = "system.posix_acl_access"
	aclDefaultXattr = "system.posix_acl_default"
)

// ACL entry tags, in the order of a valid ACL.
const (
	tagUserObj  = 0x01
	tagUser     = 0x02
	tagGroupObj = 0x04
	tagGroup    = 0x08
	tagMask     = 0x10
	tagOther    = 0x20
)

// aclEntry is one entry: a tag, the user or group id of named entries,
// and rwx permission bits (4, 2, 1).
type aclEntry struct {
	tag  uint16
	id   uint32
	perm uint16
}

// acl is a list of entries in the kernel's order (by tag, then id).
type acl []aclEntry

// decodeACL reads the kernel's xattr form.
func decodeACL(b []byte) (acl, error) {
	if len(b) < 4 || (len(b)-4)%8 != 0 || binary.LittleEndian.Uint32(b) != 2 {
		return nil, errors.New("not a POSIX ACL")
	}
	var a acl
	for off := 4; off < len(b); off += 8 {
		a = append(a, aclEntry{tag: binary.LittleEndian.Uint16(b[off:]), perm: binary.LittleEndian.Uint16(b[off+2:]),
			id: binary.LittleEndian.Uint32(b[off+4:])})
	}
	return a, nil
}

// encode writes the kernel's xattr form; ids of unnamed entries are -1.
func (a acl) encode() []byte {
	b := make([]byte, 4+8*len(a))
	binary.LittleEndian.PutUint32(b, 2)
	for i, e := range a {
		off := 4 + 8*i
		id := e.id
		if e.tag != tagUser && e.tag != tagGroup {
			id = ^uint32(0)
		}
		binary.LittleEndian.PutUint16(b[off:], e.tag)
		binary.LittleEndian.PutUint16(b[off+2:], e.perm)
		binary.LittleEndian.PutUint32(b[off+4:], id)
	}
	return b
}

// sort puts the entries in the kernel's order.
func (a acl) sort() {
	sort.SliceStable(a, func(i, j int) bool {
		if a[i].tag != a[j].tag {
			return a[i].tag < a[j].tag
		}
		return a[i].id < a[j].id
	})
}

// find returns the index of the entry with tag and id, or -1.
func (a acl) find(tag uint16, id uint32) int {
	for i, e := range a {
		if e.tag == tag && (tag != tagUser && tag != tagGroup || e.id == id) {
			return i
		}
	}
	return -1
}

// named reports whether a has named user or group entries.
func (a acl) named() bool {
	for _, e := range a {
		if e.tag == tagUser || e.tag == tagGroup {
			return true
		}
	}
	return false
}

// aclFromMode is the ACL a mode stands for: owner, group and other.
func aclFromMode(mode uint32) acl {
	return acl{{tag: tagUserObj, perm: uint16(mode>>6) & 7}, {tag: tagGroupObj, perm: uint16(mode>>3) & 7},
		{tag: tagOther, perm: uint16(mode) & 7}}
}

// modeBits are the permission bits an access ACL gives the file, as the
// kernel's posix_acl_update_mode: the group bits come from the mask when
// there is one.
func (a acl) modeBits() uint32 {
	var m uint32
	for _, e := range a {
		switch e.tag {
		case tagUserObj:
			m |= uint32(e.perm) << 6
		case tagOther:
			m |= uint32(e.perm)
		case tagGroupObj:
			if a.find(tagMask, 0) < 0 {
				m |= uint32(e.perm) << 3
			}
		case tagMask:
			m |= uint32(e.perm) << 3
		}
	}
	return m
}

// calcMask sets the mask to the union of the group class (named users,
// the owning group, named groups), as acl_calc_mask does; an ACL without
// named entries and without a mask gets none.
func (a *acl) calcMask() {
	var union uint16
	for _, e := range *a {
		if e.tag == tagUser || e.tag == tagGroupObj || e.tag == tagGroup {
			union |= e.perm
		}
	}
	if i := a.find(tagMask, 0); i >= 0 {
		(*a)[i].perm = union
		return
	}
	if a.named() {
		*a = append(*a, aclEntry{tag: tagMask, perm: union})
		a.sort()
	}
}

// permString is rwx with dashes.
func permString(p uint16) string {
	b := []byte("---")
	if p&4 != 0 {
		b[0] = 'r'
	}
	if p&2 != 0 {
		b[1] = 'w'
	}
	if p&1 != 0 {
		b[2] = 'x'
	}
	return string(b)
}

// idNames looks host user and group names up once each, as getfacl
// prints them.
type idNames struct {
	mu     sync.Mutex
	users  map[uint32]string
	groups map[uint32]string
}

func (n *idNames) user(id uint32) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.users == nil {
		n.users = map[uint32]string{}
	}
	if s, ok := n.users[id]; ok {
		return s
	}
	s := strconv.FormatUint(uint64(id), 10)
	if u, err := user.LookupId(s); err == nil {
		s = u.Username
	}
	n.users[id] = s
	return s
}

func (n *idNames) group(id uint32) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.groups == nil {
		n.groups = map[uint32]string{}
	}
	if s, ok := n.groups[id]; ok {
		return s
	}
	s := strconv.FormatUint(uint64(id), 10)
	if g, err := user.LookupGroupId(s); err == nil {
		s = g.Name
	}
	n.groups[id] = s
	return s
}

// aclSpec is one entry of a setfacl ACL spec: default marks a default ACL
// entry; noPerm entries (-x) name an entry without permissions.
type aclSpec struct {
	def   bool
	entry aclEntry
	xperm bool // X: execute only for directories or files executable by someone
}

// parseACLSpec parses setfacl's ACL_SPEC ("u:bin:rwx,g::r-x,d:m::rx");
// with perms false the entries carry no permissions (setfacl -x).
func parseACLSpec(spec string, perms bool) ([]aclSpec, error) {
	var out []aclSpec
	for _, f := range strings.Split(spec, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		bad := func() error { return usagef("malformed ACL entry %q", f) }
		parts := strings.Split(f, ":")
		var s aclSpec
		if len(parts) > 0 && (parts[0] == "d" || parts[0] == "default") {
			s.def = true
			parts = parts[1:]
		}
		if len(parts) == 0 {
			return nil, bad()
		}
		tag := parts[0]
		var qual, perm string
		switch {
		case perms && len(parts) == 3:
			qual, perm = parts[1], parts[2]
		case perms && len(parts) == 2 && (tag == "o" || tag == "other" || tag == "m" || tag == "mask"):
			perm = parts[1]
		case !perms && (len(parts) == 2 || len(parts) == 1):
			if len(parts) == 2 {
				qual = parts[1]
			}
		default:
			return nil, bad()
		}
		switch tag {
		case "u", "user":
			s.entry.tag = tagUserObj
			if qual != "" {
				s.entry.tag = tagUser
				id, err := lookupUserID(qual)
				if err != nil {
					return nil, err
				}
				s.entry.id = id
			}
		case "g", "group":
			s.entry.tag = tagGroupObj
			if qual != "" {
				s.entry.tag = tagGroup
				id, err := lookupGroupID(qual)
				if err != nil {
					return nil, err
				}
				s.entry.id = id
			}
		case "m", "mask":
			s.entry.tag = tagMask
		case "o", "other":
			s.entry.tag = tagOther
		default:
			return nil, bad()
		}
		if (s.entry.tag == tagMask || s.entry.tag == tagOther) && qual != "" {
			return nil, bad()
		}
		if perms {
			p, x, err := parsePerm(perm)
			if err != nil {
				return nil, usagef("malformed ACL entry %q: %v", f, err)
			}
			s.entry.perm, s.xperm = p, x
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		return nil, usagef("empty ACL specification")
	}
	return out, nil
}

// parsePerm parses rwx letters (with - and X) or one octal digit.
func parsePerm(s string) (uint16, bool, error) {
	if len(s) == 1 && s[0] >= '0' && s[0] <= '7' {
		return uint16(s[0] - '0'), false, nil
	}
	if s == "" {
		return 0, false, errors.New("no permissions")
	}
	var p uint16
	x := false
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case 'r':
			p |= 4
		case 'w':
			p |= 2
		case 'x':
			p |= 1
		case 'X':
			x = true
		case '-':
		default:
			return 0, false, fmt.Errorf("bad permission %q", s[i])
		}
	}
	return p, x, nil
}

// lookupUserID resolves a numeric or host user name.
func lookupUserID(s string) (uint32, error) {
	if v, err := strconv.ParseUint(s, 10, 32); err == nil {
		return uint32(v), nil
	}
	u, err := user.Lookup(s)
	if err != nil {
		return 0, usagef("invalid user %q", s)
	}
	v, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return 0, usagef("user %q has id %q", s, u.Uid)
	}
	return uint32(v), nil
}

// lookupGroupID resolves a numeric or host group name.
func lookupGroupID(s string) (uint32, error) {
	if v, err := strconv.ParseUint(s, 10, 32); err == nil {
		return uint32(v), nil
	}
	g, err := user.LookupGroup(s)
	if err != nil {
		return 0, usagef("invalid group %q", s)
	}
	v, err := strconv.ParseUint(g.Gid, 10, 32)
	if err != nil {
		return 0, usagef("group %q has id %q", s, g.Gid)
	}
	return uint32(v), nil
}
