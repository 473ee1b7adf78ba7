package btrfs_test

import (
	"bytes"
	"testing"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// TestCreateDataFlags: CreateOptions.NoDataCow and NoDataSum give a new
// regular file its flags in the change that makes it, as the kernel's
// nodatacow and nodatasum mount options do (NODATACOW brings NODATASUM);
// other kinds of inode ignore them. btrfs check then finds the files'
// data without checksums, as the flags say.
func TestCreateDataFlags(t *testing.T) {
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{Size: 256 << 20})
	fsys, err := btrfs.OpenWritable(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	const noDataSum, noDataCow = 1 << 0, 1 << 1
	cases := []struct {
		name string
		dir  bool
		opts btrfs.CreateOptions
		want uint64
	}{
		{"cow", false, btrfs.CreateOptions{NoDataCow: true}, noDataCow | noDataSum},
		{"sum", false, btrfs.CreateOptions{NoDataSum: true}, noDataSum},
		{"exact", false, btrfs.CreateOptions{NoDataCow: true, Exact: true}, noDataCow | noDataSum},
		{"plain", false, btrfs.CreateOptions{}, 0},
		{"dir", true, btrfs.CreateOptions{NoDataCow: true, NoDataSum: true}, 0},
	}
	data := bytes.Repeat([]byte("gobtrfs "), 8192)
	for _, c := range cases {
		if c.dir {
			err = fsys.MkdirWith(c.name, 0o755, &c.opts)
		} else if err = fsys.CreateEmptyWith(c.name, 0o644, &c.opts); err == nil {
			err = fsys.WriteFile(c.name, data, 0o644)
		}
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	btrfstest.Check(t, []string{img}, true)
	ro, err := btrfs.Open(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	for _, c := range cases {
		fi, err := ro.Stat(c.name)
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*btrfs.Stat)
		if got := st.Flags & (noDataCow | noDataSum); got != c.want {
			t.Errorf("%s: flags %#x, want %#x", c.name, got, c.want)
		}
		if !c.dir {
			got, err := ro.ReadFile(c.name)
			if err != nil || !bytes.Equal(got, data) {
				t.Errorf("%s: read back %d bytes, %v", c.name, len(got), err)
			}
		}
	}
}
