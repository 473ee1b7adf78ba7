package cli

import (
	"strings"
	"testing"

	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// TestPropertyVerbs sets ro, label and compression with gobtrfs property
// set and compares get and list with btrfs property on the kernel's mount
// (and on the image itself for the label, which progs reads offline).
func TestPropertyVerbs(t *testing.T) {
	btrfstest.RequireInterop(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{Label: "before"})
	ok(t, "subvolume", "create", img+":/sv", img+":/sv2")
	ok(t, "mkdir", img+":/d")
	ok(t, "touch", img+":/f", img+":/g", img+":/d/h")
	for _, s := range [][]string{
		{img + ":/sv", "ro", "true"},
		{img + ":/sv2", "ro", "true"},
		{img + ":/sv2", "ro", "false"},
		{img, "label", "after it"},
		{img + ":/f", "compression", "zstd"},
		{img + ":/d", "compression", "lzo"},
		{img + ":/g", "compression", "none"},
		{img + ":/d/h", "compression", "zlib:3"},
		{img + ":/d/h", "compression", ""},
	} {
		ok(t, append([]string{"property", "set"}, s...)...)
	}
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"set", img + ":/sv", "ro", "maybe"}, "invalid value for property: maybe"},
		{[]string{"set", img + ":/d", "ro", "true"}, "object is not compatible with property: ro"},
		{[]string{"get", img + ":/sv", "foo"}, "unknown property: foo"},
		{[]string{"set", img + ":/f", "compression", "gzip"}, "failed to set compression for f: Invalid argument"},
		{[]string{"set", img + ":/sv/x", "compression", "zstd"}, "No such file"},
	} {
		_, stderr, code := run(t, append([]string{"property"}, c.args...)...)
		if code != 1 || !strings.Contains(stderr, c.msg) {
			t.Errorf("property %v: exit %d, %q; want 1 and %q", c.args, code, stderr, c.msg)
		}
	}
	btrfstest.Check(t, []string{img}, false)
	if got, want := ok(t, "property", "get", img, "label"), progs(t, "btrfs", "property", "get", "-t", "device", img, "label"); got != want {
		t.Errorf("label: gobtrfs %q, btrfs-progs %q", got, want)
	}

	mnt := btrfstest.Mount(t, "ro,subvolid=5", img)
	// verb, options, object (a path below the top), property name.
	for _, c := range []struct {
		verb string
		opts []string
		obj  string
		name []string
	}{
		{"get", nil, "", nil}, {"get", nil, "", []string{"label"}}, {"get", nil, "sv", nil}, {"get", nil, "sv2", nil},
		{"get", nil, "sv", []string{"ro"}}, {"get", nil, "f", nil}, {"get", nil, "g", nil}, {"get", nil, "d", nil},
		{"get", nil, "d/h", nil}, {"get", nil, "f", []string{"compression"}},
		{"get", []string{"-t", "subvol"}, "", nil}, {"get", []string{"-t", "inode"}, "d", nil},
		{"list", nil, "", nil}, {"list", nil, "sv", nil}, {"list", nil, "d", nil},
	} {
		ours := ok(t, append(append(append([]string{"property", c.verb}, c.opts...), img+":/"+c.obj), c.name...)...)
		want := progs(t, "btrfs", append(append(append([]string{"property", c.verb}, c.opts...), mnt+"/"+c.obj), c.name...)...)
		if ours != want {
			t.Errorf("property %s %v %s %v differs:\nbtrfs-progs:\n%s\ngobtrfs:\n%s", c.verb, c.opts, c.obj, c.name, want, ours)
		}
	}
	lsattr := progs(t, "lsattr", "-d", mnt+"/f", mnt+"/g", mnt+"/d")
	if want := "--------c------------- " + mnt + "/f\n---------------------m " + mnt + "/g\n--------c------------- " + mnt + "/d\n"; lsattr != want {
		t.Errorf("lsattr after property set compression:\n%s\nwant\n%s", lsattr, want)
	}
	btrfstest.Unmount(t, mnt)
	progs(t, "btrfs", "property", "set", "-t", "device", img, "label", "from progs")
	if got := ok(t, "property", "get", "--json", img); got != "{\n  \"label\": \"from progs\",\n  \"ro\": \"false\"\n}\n" {
		t.Errorf("property get --json after progs set the label: %q", got)
	}
}
