//go:build linux

package blockdev

import (
	"testing"

	"golang.org/x/sys/unix"
)

// TestParseMountinfo: the fields kernelMount needs, with the kernel's
// escapes undone and the optional fields skipped.
func TestParseMountinfo(t *testing.T) {
	for _, c := range []struct {
		line string
		want mountLine
		ok   bool
	}{
		{`46 27 0:40 / /tmp/lockwt-mnt rw,relatime - btrfs /dev/loop0 rw,discard=async,space_cache=v2,subvolid=5,subvol=/`,
			mountLine{dev: unix.Mkdev(0, 40), point: "/tmp/lockwt-mnt", fstype: "btrfs", source: "/dev/loop0"}, true},
		{`36 35 98:0 /mnt1 /mnt/a\040b rw,noatime master:1 shared:7 - ext3 /dev/root\134x rw,errors=continue`,
			mountLine{dev: unix.Mkdev(98, 0), point: "/mnt/a b", fstype: "ext3", source: `/dev/root\x`}, true},
		{`36 35 98:0 /mnt1 /mnt/a\04 rw - ext3`, mountLine{}, false},
		{`36 35 x:0 / /mnt rw - ext3 /dev/sda rw`, mountLine{}, false},
		{``, mountLine{}, false},
	} {
		got, ok := parseMountinfo(c.line)
		if ok != c.ok || got != c.want {
			t.Errorf("%q:\n got %+v %v\nwant %+v %v", c.line, got, ok, c.want, c.ok)
		}
	}
	if got := unescapeMountinfo(`a\040b\011c\\d\12`); got != "a b\tc\\\\d\\12" {
		t.Errorf("unescape: %q", got)
	}
}
