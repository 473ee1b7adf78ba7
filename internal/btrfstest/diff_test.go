package btrfstest_test

import (
	"strings"
	"testing"

	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// sampleTree is a small tree with one entry of every type, xattrs and a
// hardlink group, including names that are not valid UTF-8.
func sampleTree() *btrfstest.Tree {
	es := []*btrfstest.Entry{
		{Path: ".", Type: btrfstest.TypeDir, Ino: 256, Perm: 0o755, Nlink: 1, MtimeNs: 1},
		{Path: "d", Type: btrfstest.TypeDir, Perm: 0o1777, UID: 1000, GID: 1000, Nlink: 1, MtimeNs: -5},
		{Path: "d/f", Type: btrfstest.TypeRegular, Perm: 0o4755, Nlink: 2, Size: 10000, MtimeNs: 123456789,
			SHA256: strings.Repeat("ab", 32), Data: []btrfstest.Range{{Off: 0, Len: 100}, {Off: 8192, Len: 1808}},
			Xattrs: map[string]string{"user.a": "x", "trusted.bin": "\x00\xff\"\n", "user.empty": ""}},
		{Path: "hl", Type: btrfstest.TypeRegular, Nlink: 2, Size: 10000, SHA256: strings.Repeat("ab", 32),
			Data: []btrfstest.Range{{Off: 0, Len: 100}, {Off: 8192, Len: 1808}}},
		{Path: "s \"q\"", Type: btrfstest.TypeSymlink, Perm: 0o777, Size: 5, Target: "a=b \xff"},
		{Path: "bad\xff\n", Type: btrfstest.TypeFifo, Perm: 0o600},
		{Path: "sock", Type: btrfstest.TypeSocket, Perm: 0o755},
		{Path: "c", Type: btrfstest.TypeCharDev, RdevMajor: 259, RdevMinor: 65536},
		{Path: "b", Type: btrfstest.TypeBlockDev, RdevMajor: 8, RdevMinor: 1},
		{Path: "ph", Type: btrfstest.TypeDir, Ino: 2, Perm: 0o755, Placeholder: true, MtimeNs: 77},
	}
	t := &btrfstest.Tree{Entries: map[string]*btrfstest.Entry{}, Links: [][]string{{"d/f", "hl"}}}
	for _, e := range es {
		t.Entries[e.Path] = e
	}
	return t
}

// clone deep-copies a tree so a test can change one side.
func clone(t *btrfstest.Tree) *btrfstest.Tree {
	out := &btrfstest.Tree{Entries: map[string]*btrfstest.Entry{}}
	for p, e := range t.Entries {
		c := *e
		c.Data = append([]btrfstest.Range(nil), e.Data...)
		if e.Xattrs != nil {
			c.Xattrs = map[string]string{}
			for k, v := range e.Xattrs {
				c.Xattrs[k] = v
			}
		}
		out.Entries[p] = &c
	}
	for _, g := range t.Links {
		out.Links = append(out.Links, append([]string(nil), g...))
	}
	return out
}

func TestDiffEqual(t *testing.T) {
	a := sampleTree()
	if d := btrfstest.Diff(a, clone(a), btrfstest.DiffOptions{}); len(d) != 0 {
		t.Fatalf("equal trees differ:\n%s", strings.Join(d, "\n"))
	}
}

// TestDiffReports changes one fact at a time and requires Diff to report it
// as exactly one line naming path and field, and, where an option exists to
// hide it, that the option does.
func TestDiffReports(t *testing.T) {
	type opts = btrfstest.DiffOptions
	cases := []struct {
		name   string
		change func(*btrfstest.Tree)
		want   string // substring of the one reported line
		opts   opts   // options of the reporting Diff
		hideBy *opts  // options that must hide the difference
	}{
		{"mtime", func(t *btrfstest.Tree) { t.Entries["d/f"].MtimeNs++ }, `"d/f": mtime`, opts{}, nil},
		{"content", func(t *btrfstest.Tree) { t.Entries["d/f"].SHA256 = strings.Repeat("cd", 32) }, `"d/f": content`, opts{}, nil},
		{"size", func(t *btrfstest.Tree) { t.Entries["hl"].Size = 10001 }, `"hl": size`, opts{}, nil},
		{"perm", func(t *btrfstest.Tree) { t.Entries["d"].Perm = 0o777 }, `"d": perm: want 1777, got 0777`, opts{}, nil},
		{"owner", func(t *btrfstest.Tree) { t.Entries["d"].UID = 0 }, `"d": owner`, opts{}, &opts{IgnoreOwners: true}},
		{"dir mtime", func(t *btrfstest.Tree) { t.Entries["d"].MtimeNs = 9 }, `"d": mtime`, opts{}, &opts{IgnoreDirMtime: true}},
		{"xattr value", func(t *btrfstest.Tree) { t.Entries["d/f"].Xattrs["user.a"] = "y" }, `"d/f": xattr "user.a": want "x", got "y"`,
			opts{}, &opts{IgnoreXattr: func(n string) bool { return n == "user.a" }}},
		{"xattr missing", func(t *btrfstest.Tree) { delete(t.Entries["d/f"].Xattrs, "user.empty") }, `xattr "user.empty" missing`, opts{}, nil},
		{"xattr unexpected", func(t *btrfstest.Tree) { t.Entries["sock"].Xattrs = map[string]string{"user.n": "v"} }, `"sock": xattr "user.n" unexpected`, opts{}, nil},
		{"holes", func(t *btrfstest.Tree) { t.Entries["hl"].Data = []btrfstest.Range{{Off: 0, Len: 10000}} },
			`"hl": data ranges (4K blocks): want [0+4096,8192+4096], got [0+12288]`, opts{}, &opts{IgnoreHoles: true}},
		{"type", func(t *btrfstest.Tree) { t.Entries["sock"].Type = btrfstest.TypeFifo }, `"sock": type: want socket, got fifo`, opts{}, nil},
		{"target", func(t *btrfstest.Tree) { t.Entries["s \"q\""].Target = "x" }, `symlink target`, opts{}, nil},
		{"rdev", func(t *btrfstest.Tree) { t.Entries["c"].RdevMinor = 0 }, `"c": rdev: want 259:65536, got 259:0`, opts{}, nil},
		{"missing", func(t *btrfstest.Tree) { delete(t.Entries, "b") }, `"b": missing (want blk)`,
			opts{}, &opts{Filter: func(p string) bool { return p != "b" }}},
		{"unexpected", func(t *btrfstest.Tree) { t.Entries["new"] = &btrfstest.Entry{Path: "new", Type: btrfstest.TypeFifo} }, `"new": unexpected fifo`, opts{}, nil},
		{"broken hardlink", func(t *btrfstest.Tree) { t.Links = nil }, `hardlink group missing: {"d/f" "hl"}`,
			opts{}, &opts{Filter: func(p string) bool { return p != "hl" }}},
		{"nlink", func(t *btrfstest.Tree) { t.Entries["hl"].Nlink = 1 }, `"hl": nlink: want 2, got 1`, opts{CompareNlink: true}, &opts{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			want, got := sampleTree(), sampleTree()
			c.change(got)
			if d := btrfstest.Diff(want, got, c.opts); len(d) != 1 || !strings.Contains(d[0], c.want) {
				t.Fatalf("Diff = %q, want one line containing %q", d, c.want)
			}
			if c.hideBy == nil {
				return
			}
			if d := btrfstest.Diff(want, got, *c.hideBy); len(d) != 0 {
				t.Fatalf("with the option set, Diff = %q, want nothing", d)
			}
		})
	}
}

// TestDiffTolerates covers what Diff must not report: hole boundaries inside
// one 4 KiB block, a placeholder directory's mtime, inode numbers, directory
// sizes.
func TestDiffTolerates(t *testing.T) {
	want, got := sampleTree(), sampleTree()
	got.Entries["d/f"].Data = []btrfstest.Range{{Off: 0, Len: 4000}, {Off: 8200, Len: 1800}}
	got.Entries["ph"].MtimeNs = 99
	got.Entries["d/f"].Ino = 1234
	got.Entries["d"].Size = 4096
	if d := btrfstest.Diff(want, got, btrfstest.DiffOptions{}); len(d) != 0 {
		t.Fatalf("Diff = %q, want nothing", d)
	}
}

func TestSub(t *testing.T) {
	tr := sampleTree()
	sub := tr.Sub("d")
	if sub == nil || len(sub.Entries) != 2 || sub.Entries["."].Perm != 0o1777 || sub.Entries["f"] == nil {
		t.Fatalf("Sub(d) = %+v", sub)
	}
	if sub.Entries["f"].Path != "f" || len(sub.Links) != 0 {
		t.Fatalf("Sub(d): path %q, links %q", sub.Entries["f"].Path, sub.Links)
	}
	if tr.Sub("hl") != nil || tr.Sub("nope") != nil {
		t.Fatal("Sub of a non-directory must be nil")
	}
	if d := btrfstest.Diff(tr, tr.Sub("."), btrfstest.DiffOptions{}); len(d) != 0 {
		t.Fatalf("Sub(.) differs: %q", d)
	}
}
