//go:build linux

package btrfstest

import (
	"encoding/binary"
	"fmt"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// ExtrefLinks and ExtrefNameLen size the hardlink set of PopulateLinks that
// must overflow an INODE_REF item: 330 names of 200 bytes need about 69 KB
// of back references in one directory, more than a leaf of any node size
// (up to 64 KiB) holds, so the kernel has to use INODE_EXTREF items.
const (
	ExtrefLinks   = 330
	ExtrefNameLen = 200
)

// PopulateLinks creates dir/links with hardlinks: two names in one
// directory, names across directories (three directories share one inode),
// and dir/links/extref with ExtrefLinks links of ExtrefNameLen-byte names
// to one file (forcing INODE_EXTREF items).
func PopulateLinks(tb testing.TB, dir string, seed int64) {
	tb.Helper()
	p := newPopulator(tb, dir, "links", seed)
	for _, d := range []string{"a", "b", "c", "extref"} {
		p.mkdir(d, 0o755)
	}
	p.write("a/same-dir", p.random(5000))
	p.link("a/same-dir", "a/same-dir-2")
	p.write("a/across", p.random(3000))
	p.link("a/across", "b/across")
	p.link("a/across", "c/across-renamed")
	p.write("b/inline-linked", p.random(100))
	p.link("b/inline-linked", "c/inline-linked")
	p.write("extref/target", p.random(64))
	for i := range ExtrefLinks {
		name := fmt.Sprintf("%04d-", i)
		name += strings.Repeat(string(rune('a'+i%26)), ExtrefNameLen-len(name))
		p.link("extref/target", "extref/"+name)
	}
	p.stampTimes()
}

func (p *populator) link(old, rel string) {
	p.tb.Helper()
	p.check(os.Link(p.path(old), p.path(rel)))
}

// PopulateXattrs creates dir/xattrs with extended attributes: a file with
// 100 small user.* values, one with a large value (3800 bytes, within the
// 4 KiB-node limit), values in the user., trusted. and security.
// namespaces including an empty value, trusted.* on a symlink and a fifo
// (user.* is not allowed there), and POSIX ACLs (system.posix_acl_access on
// a file, access and default ACLs on a directory) as raw xattr bytes.
func PopulateXattrs(tb testing.TB, dir string, seed int64) {
	tb.Helper()
	p := newPopulator(tb, dir, "xattrs", seed)
	p.write("many", p.random(10))
	for i := range 100 {
		p.setXattr("many", fmt.Sprintf("user.attr%03d", i), p.random(p.rng.IntN(64)))
	}
	p.write("large", nil)
	p.setXattr("large", "user.large", p.random(3800))
	p.write("namespaces", p.text(100))
	p.setXattr("namespaces", "user.text", []byte("plain text value"))
	p.setXattr("namespaces", "user.empty", nil)
	p.setXattr("namespaces", "trusted.secret", p.random(33))
	p.setXattr("namespaces", "security.gobtrfs", []byte("label\x00with nul"))
	p.mkdir("dir", 0o755)
	p.setXattr("dir", "user.on-dir", []byte("dir value"))
	p.symlink("namespaces", "symlink")
	p.setXattr("symlink", "trusted.on-symlink", []byte("lnk"))
	p.mknod("fifo", unix.S_IFIFO, 0o600, 0, 0)
	p.setXattr("fifo", "trusted.on-fifo", []byte("fifo"))
	p.write("acl", p.text(10))
	p.setXattr("acl", "system.posix_acl_access", posixACL(0o6, 0o4, 0o4, 0o0, 1000, 0o6))
	p.mkdir("acl-dir", 0o755)
	acl := posixACL(0o7, 0o5, 0o7, 0o5, 1000, 0o7)
	p.setXattr("acl-dir", "system.posix_acl_access", acl)
	p.setXattr("acl-dir", "system.posix_acl_default", acl)
	p.stampTimes()
}

// ACL tags of the Linux POSIX ACL xattr format.
const (
	aclUserObj  = 0x01
	aclUser     = 0x02
	aclGroupObj = 0x04
	aclMask     = 0x10
	aclOther    = 0x20
	aclNoID     = 0xffffffff
)

// posixACL encodes an ACL in the kernel's xattr format (version 2, then
// 8-byte entries {tag u16, perm u16, id u32}, little-endian, in tag order)
// with one named-user entry, so that it is not equivalent to a mode.
func posixACL(user, group, mask, other uint16, uid uint32, uperm uint16) []byte {
	entries := []struct {
		tag, perm uint16
		id        uint32
	}{
		{aclUserObj, user, aclNoID},
		{aclUser, uperm, uid},
		{aclGroupObj, group, aclNoID},
		{aclMask, mask, aclNoID},
		{aclOther, other, aclNoID},
	}
	b := binary.LittleEndian.AppendUint32(nil, 2)
	for _, e := range entries {
		b = binary.LittleEndian.AppendUint16(b, e.tag)
		b = binary.LittleEndian.AppendUint16(b, e.perm)
		b = binary.LittleEndian.AppendUint32(b, e.id)
	}
	return b
}

// PopulateModes creates dir/modes with every special permission bit
// (setuid, setgid, sticky, on files and directories), unusual modes (0000,
// 0444), owners other than root (including large ids, and a symlink
// chowned with lchown), and timestamps with nanoseconds, before 1970 and
// after 2038, on files, directories and symlinks.
func PopulateModes(tb testing.TB, dir string, seed int64) {
	tb.Helper()
	p := newPopulator(tb, dir, "modes", seed)
	type node struct {
		rel      string
		dir      bool
		perm     uint32
		uid, gid int
		mtime    int64
	}
	nodes := []node{
		{"setuid", false, 0o4755, 1000, 1000, p.mtime()},
		{"setgid", false, 0o2755, 0, 1000, p.mtime()},
		{"setuid-setgid", false, 0o6711, 1000, 0, p.mtime()},
		{"none", false, 0o000, 65534, 65534, p.mtime()},
		{"readonly", false, 0o444, 123456789, 987654321, p.mtime()},
		{"pre-1970", false, 0o644, 0, 0, -1_000_000_000_123_456_789},
		{"post-2038", false, 0o644, 0, 0, 4_102_444_800_987_654_321},
		{"epoch", false, 0o644, 0, 0, 0},
		{"sticky-dir", true, 0o1777, 0, 0, p.mtime()},
		{"setgid-dir", true, 0o2775, 1000, 1000, p.mtime()},
		{"private-dir", true, 0o700, 1000, 1000, p.mtime()},
	}
	for _, n := range nodes {
		if n.dir {
			p.mkdir(n.rel, 0o755)
		} else {
			p.write(n.rel, p.random(16))
		}
		// chown first: it clears setuid/setgid.
		p.check(os.Lchown(p.path(n.rel), n.uid, n.gid))
		p.check(unix.Chmod(p.path(n.rel), n.perm))
		p.setTimes(n.rel, n.mtime)
	}
	p.symlink("setuid", "symlink-owned")
	p.check(os.Lchown(p.path("symlink-owned"), 1000, 1000))
	p.setTimes("symlink-owned", p.mtime())
	p.setTimes("", p.mtime())
}

// PopulateBigDir creates dir/bigdir with n empty files whose names vary in
// length (so the directory spans many leaves of DIR_ITEM and DIR_INDEX
// items). Slow for large n.
func PopulateBigDir(tb testing.TB, dir string, seed int64, n int) {
	tb.Helper()
	p := newPopulator(tb, dir, "bigdir", seed)
	for i := range n {
		name := fmt.Sprintf("entry-%05d-%s", i, strings.Repeat("x", p.rng.IntN(40)))
		fd, err := unix.Open(p.path(name), unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
		p.check(err)
		p.check(unix.Fchmod(fd, 0o644)) // independent of the umask
		p.check(unix.Close(fd))
	}
	p.setTimes("", p.mtime())
}

// stampTimes gives every path of the part a deterministic mtime (children
// before their directory, since creating entries changes a directory's
// mtime), so the tree is a function of the seed down to timestamps.
func (p *populator) stampTimes() {
	p.tb.Helper()
	var walk func(rel string)
	walk = func(rel string) {
		ents, err := os.ReadDir(p.path(rel))
		p.check(err)
		for _, e := range ents { // ReadDir sorts by name: a stable order
			child := strings.TrimPrefix(rel+"/"+e.Name(), "/")
			if e.IsDir() {
				walk(child)
			} else {
				p.setTimes(child, p.mtime())
			}
		}
		p.setTimes(rel, p.mtime())
	}
	walk("")
}
