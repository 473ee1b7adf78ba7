package cli

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strconv"
	"strings"

	"github.com/gobtrfs/btrfs"
)

// getfacl and setfacl, as acl's tools behave on a Linux btrfs mount.

var getfaclWord = word{
	name:     "getfacl",
	synopsis: "[-a] [-d] [-c] [-e] [-E] [-s] [-n] [--json] PATH...",
	short:    "Print POSIX ACLs",
	long: `Print the access ACL of each file (the mode's three entries when it has no
ACL) and the default ACL of directories, as getfacl(1) prints them, byte for
byte: a "# file:", "# owner:", "# group:" (and "# flags:" for set-id and
sticky bits) header, one entry a line with "#effective:" where the mask
limits it, and a blank line. The file name is the path inside the image.
Names are looked up on this host (-n: numbers). Symbolic links are followed.
With --json, an array of {file, owner, group, uid, gid, flags, access,
default} with entries {tag, qualifier, perms, effective}.`,
	flags: []flagDef{
		{name: "a", short: 'a', long: "access", help: "print only the access ACL"},
		{name: "d", short: 'd', long: "default", help: "print only the default ACL"},
		{name: "c", short: 'c', long: "omit-header", help: "do not print the header lines"},
		{name: "e", short: 'e', long: "all-effective", help: "print every effective right"},
		{name: "E", short: 'E', long: "no-effective", help: "print no effective rights"},
		{name: "s", short: 's', long: "skip-base", help: "skip files with only the base entries"},
		{name: "n", short: 'n', long: "numeric", help: "print numeric user and group ids"},
		{name: "json", long: "json", help: "print JSON"},
	},
	readOnly: true,
	run:      runGetfacl,
}

// faclJSON is one file of getfacl --json.
type faclJSON struct {
	File    string          `json:"file"`
	Owner   string          `json:"owner"`
	Group   string          `json:"group"`
	UID     uint32          `json:"uid"`
	GID     uint32          `json:"gid"`
	Flags   string          `json:"flags,omitempty"`
	Access  []faclEntryJSON `json:"access"`
	Default []faclEntryJSON `json:"default,omitempty"`
	acls    [2]acl          // access, default
	eff     [2][]string     // effective rights to print per entry ("" none)
}

type faclEntryJSON struct {
	Tag       string `json:"tag"`
	Qualifier string `json:"qualifier,omitempty"`
	Perms     string `json:"perms"`
	Effective string `json:"effective"`
}

func runGetfacl(s *session, a *wordArgs) error {
	if len(a.ops) == 0 {
		return usagef("missing PATH")
	}
	paths, err := s.paths(a.ops)
	if err != nil {
		return err
	}
	names := &idNames{}
	var all []faclJSON
	var b strings.Builder
	for _, p := range paths {
		f, skip, err := getfaclOne(s.fsys, p, a, names)
		if err != nil {
			return err
		}
		if skip {
			continue
		}
		if a.has("json") {
			all = append(all, f)
			continue
		}
		printFacl(&b, f, a)
	}
	if a.has("json") {
		if all == nil {
			all = []faclJSON{}
		}
		return writeJSON(s.out, all)
	}
	_, err = io.WriteString(s.out, b.String())
	return err
}

// readACLs returns the access ACL of p (from its mode when it has none)
// and its default ACL (nil when none).
func readACLs(fsys *btrfs.FS, p string, st *btrfs.Stat) (acl, acl, error) {
	access := aclFromMode(st.Mode)
	v, err := fsys.Getxattr(p, aclAccessXattr)
	switch {
	case err == nil:
		if access, err = decodeACL(v); err != nil {
			return nil, nil, &fs.PathError{Op: "getfacl", Path: p, Err: err}
		}
	case !errors.Is(err, errNoData):
		return nil, nil, err
	}
	var def acl
	if st.Mode&0o170000 == 0o040000 {
		v, err := fsys.Getxattr(p, aclDefaultXattr)
		switch {
		case err == nil:
			if def, err = decodeACL(v); err != nil {
				return nil, nil, &fs.PathError{Op: "getfacl", Path: p, Err: err}
			}
		case !errors.Is(err, errNoData):
			return nil, nil, err
		}
	}
	return access, def, nil
}

// getfaclOne collects what getfacl prints of p; skip is set for -s and a
// file with only base entries.
func getfaclOne(fsys *btrfs.FS, p string, a *wordArgs, names *idNames) (faclJSON, bool, error) {
	file := p
	q, err := followLinks(fsys, p)
	if err != nil {
		return faclJSON{}, false, err
	}
	fi, err := fsys.Stat(q)
	if err != nil {
		return faclJSON{}, false, err
	}
	st, ok := fi.Sys().(*btrfs.Stat)
	if !ok {
		return faclJSON{}, false, fmt.Errorf("%s: no owner", p)
	}
	access, def, err := readACLs(fsys, q, st)
	if err != nil {
		return faclJSON{}, false, err
	}
	if a.has("s") && !access.named() && access.find(tagMask, 0) < 0 && def == nil {
		return faclJSON{}, true, nil
	}
	user := func(id uint32) string {
		if a.has("n") {
			return strconv.FormatUint(uint64(id), 10)
		}
		return names.user(id)
	}
	group := func(id uint32) string {
		if a.has("n") {
			return strconv.FormatUint(uint64(id), 10)
		}
		return names.group(id)
	}
	f := faclJSON{File: file, Owner: user(st.UID), Group: group(st.GID), UID: st.UID, GID: st.GID}
	if st.Mode&0o7000 != 0 {
		fl := []byte("---")
		if st.Mode&0o4000 != 0 {
			fl[0] = 's'
		}
		if st.Mode&0o2000 != 0 {
			fl[1] = 's'
		}
		if st.Mode&0o1000 != 0 {
			fl[2] = 't'
		}
		f.Flags = string(fl)
	}
	f.acls = [2]acl{access, def}
	for i, l := range f.acls {
		mask := uint16(7)
		hasMask := false
		if m := l.find(tagMask, 0); m >= 0 {
			mask, hasMask = l[m].perm, true
		}
		var entries []faclEntryJSON
		var eff []string
		for _, e := range l {
			j := faclEntryJSON{Perms: permString(e.perm), Effective: permString(e.perm)}
			switch e.tag {
			case tagUserObj:
				j.Tag = "user"
			case tagUser:
				j.Tag, j.Qualifier = "user", user(e.id)
			case tagGroupObj:
				j.Tag = "group"
			case tagGroup:
				j.Tag, j.Qualifier = "group", group(e.id)
			case tagMask:
				j.Tag = "mask"
			case tagOther:
				j.Tag = "other"
			default:
				j.Tag = fmt.Sprintf("tag%d", e.tag)
			}
			show := ""
			if hasMask && (e.tag == tagUser || e.tag == tagGroupObj || e.tag == tagGroup) {
				j.Effective = permString(e.perm & mask)
				if !a.has("E") && (a.has("e") || e.perm&mask != e.perm) {
					show = j.Effective
				}
			}
			entries = append(entries, j)
			eff = append(eff, show)
		}
		f.eff[i] = eff
		if i == 0 {
			f.Access = entries
		} else {
			f.Default = entries
		}
	}
	return f, false, nil
}

// printFacl prints one file as getfacl does.
func printFacl(b *strings.Builder, f faclJSON, a *wordArgs) {
	access, def := !a.has("d") || a.has("a"), !a.has("a") || a.has("d")
	if !a.has("c") {
		name := strings.TrimPrefix(f.File, "/")
		fmt.Fprintf(b, "# file: %s\n# owner: %s\n# group: %s\n", octalQuote(name, "\n\r"),
			octalQuote(f.Owner, "\n\r"), octalQuote(f.Group, "\n\r"))
		if f.Flags != "" {
			fmt.Fprintf(b, "# flags: %s\n", f.Flags)
		}
	}
	write := func(entries []faclEntryJSON, eff []string, prefix string) {
		for i, e := range entries {
			fmt.Fprintf(b, "%s%s:%s:%s", prefix, e.Tag, octalQuote(e.Qualifier, "\n\r"), e.Perms)
			if eff[i] != "" {
				fmt.Fprintf(b, "\t#effective:%s", eff[i])
			}
			b.WriteByte('\n')
		}
	}
	if access {
		write(f.Access, f.eff[0], "")
	}
	if def {
		prefix := "default:"
		if !access {
			prefix = ""
		}
		write(f.Default, f.eff[1], prefix)
	}
	b.WriteByte('\n')
}

var setfaclWord = word{
	name:     "setfacl",
	synopsis: "[-b] [-k] [-d] [-n] [-m SPEC]... [-x SPEC]... PATH...",
	short:    "Change POSIX ACLs",
	long: `Change the ACLs of each file as setfacl(1) does on Linux: -b removes every
extended entry (and the default ACL), -k the default ACL, -m adds or changes
the entries of SPEC, -x removes them; with -d, or entries written d:..., the
default ACL of a directory (made from the access ACL when it has none). SPEC
is acl's text form: u[ser]:[NAME]:PERMS, g[roup]:[NAME]:PERMS, m[ask]::PERMS,
o[ther]::PERMS, comma separated; PERMS are rwx letters (X: x for directories
and files executable by someone) or one octal digit; names are looked up on
this host. The mask becomes the union of the group class unless -n or SPEC
sets it. The file's mode follows the access ACL, and an ACL of only the three
base entries (no mask) is no ACL, as the kernel stores them. Options apply in the order
-b, -k, -m, -x. Symbolic links are followed.`,
	flags: []flagDef{
		{name: "b", short: 'b', long: "remove-all", help: "remove every extended entry"},
		{name: "k", short: 'k', long: "remove-default", help: "remove the default ACL"},
		{name: "d", short: 'd', long: "default", help: "change the default ACL"},
		{name: "n", short: 'n', long: "no-mask", help: "do not recalculate the mask"},
		{name: "m", short: 'm', long: "modify", arg: true, meta: "SPEC", help: "add or change entries"},
		{name: "x", short: 'x', long: "remove", arg: true, meta: "SPEC", help: "remove entries"},
	},
	run: runSetfacl,
}

func runSetfacl(s *session, a *wordArgs) error {
	if len(a.ops) == 0 {
		return usagef("missing PATH")
	}
	var mods, rms []aclSpec
	for _, v := range a.vals["m"] {
		sp, err := parseACLSpec(v, true)
		if err != nil {
			return err
		}
		mods = append(mods, sp...)
	}
	for _, v := range a.vals["x"] {
		sp, err := parseACLSpec(v, false)
		if err != nil {
			return err
		}
		rms = append(rms, sp...)
	}
	if len(mods) == 0 && len(rms) == 0 && !a.has("b") && !a.has("k") {
		return usagef("nothing to do (give -m, -x, -b or -k)")
	}
	if a.has("d") {
		for i := range mods {
			mods[i].def = true
		}
		for i := range rms {
			rms[i].def = true
		}
	}
	paths, err := s.paths(a.ops)
	if err != nil {
		return err
	}
	for _, p := range paths {
		if err := setfaclOne(s.fsys, p, a, mods, rms); err != nil {
			return err
		}
	}
	return nil
}

// setfaclOne changes the ACLs of one file.
func setfaclOne(fsys *btrfs.FS, p string, a *wordArgs, mods, rms []aclSpec) error {
	p, err := followLinks(fsys, p)
	if err != nil {
		return err
	}
	fi, err := fsys.Stat(p)
	if err != nil {
		return err
	}
	st := fi.Sys().(*btrfs.Stat)
	isDir := fi.IsDir()
	access, def, err := readACLs(fsys, p, st)
	if err != nil {
		return err
	}
	changed := [2]bool{}
	if a.has("b") {
		var base acl
		for _, e := range access {
			if e.tag == tagUserObj || e.tag == tagGroupObj || e.tag == tagOther {
				base = append(base, e)
			}
		}
		access, def = base, nil
		changed = [2]bool{true, true}
	}
	if a.has("k") {
		def, changed[1] = nil, true
	}
	explicitMask := [2]bool{}
	target := func(d bool) (*acl, int, error) {
		if !d {
			return &access, 0, nil
		}
		if !isDir {
			return nil, 0, &fs.PathError{Op: "setfacl", Path: p, Err: errors.New("Only directories can have default ACLs")}
		}
		if def == nil {
			def = append(acl(nil), access...)
		}
		return &def, 1, nil
	}
	for _, m := range mods {
		l, i, err := target(m.def)
		if err != nil {
			return err
		}
		e := m.entry
		if m.xperm && (isDir || st.Mode&0o111 != 0) {
			e.perm |= 1
		}
		if at := l.find(e.tag, e.id); at >= 0 {
			(*l)[at].perm = e.perm
		} else {
			*l = append(*l, e)
			l.sort()
		}
		if e.tag == tagMask {
			explicitMask[i] = true
		}
		changed[i] = true
	}
	for _, r := range rms {
		l, i, err := target(r.def)
		if err != nil {
			return err
		}
		if t := r.entry.tag; t == tagUserObj || t == tagGroupObj || t == tagOther {
			return &fs.PathError{Op: "setfacl", Path: p, Err: errors.New("cannot remove the owner, group or other entry")}
		}
		if at := l.find(r.entry.tag, r.entry.id); at >= 0 {
			*l = append((*l)[:at], (*l)[at+1:]...)
		}
		changed[i] = true
	}
	for i, l := range []*acl{&access, &def} {
		// -n keeps an existing mask; a mask the entries need is made
		// anyway, as setfacl does.
		if changed[i] && !explicitMask[i] && (!a.has("n") || l.find(tagMask, 0) < 0) && *l != nil {
			l.calcMask()
		}
	}
	if changed[0] {
		// Only the three base entries are no ACL: the kernel keeps just
		// the mode then. A mask keeps the ACL.
		if len(access) > 3 {
			if err := fsys.Setxattr(p, aclAccessXattr, access.encode()); err != nil {
				return err
			}
		} else if err := fsys.Removexattr(p, aclAccessXattr); err != nil && !errors.Is(err, errNoData) {
			return err
		}
		mode := st.Mode&^0o777 | access.modeBits()
		if mode != st.Mode {
			if err := fsys.Chmod(p, btrfs.FileModeOf(mode)); err != nil {
				return err
			}
		}
	}
	if changed[1] {
		if len(def) > 0 {
			if err := fsys.Setxattr(p, aclDefaultXattr, def.encode()); err != nil {
				return err
			}
		} else if err := fsys.Removexattr(p, aclDefaultXattr); err != nil && !errors.Is(err, errNoData) {
			return err
		}
	}
	return nil
}
