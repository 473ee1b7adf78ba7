package fuse_test

import (
	"testing"
	"time"

	"github.com/gobtrfs/btrfs/fuse"
)

// TestParseOptions reads btrfs(5) and FUSE option strings.
func TestParseOptions(t *testing.T) {
	bo, mo, err := fuse.ParseOptions("ro,subvol=/a/b,compress-force=zstd:5,commit=7,nodatacow,noatime,space_cache=v2,allow_other,default_permissions")
	if err != nil {
		t.Fatal(err)
	}
	if !mo.ReadOnly || mo.Subvol != "/a/b" || !mo.NoDataCow || !mo.NoDataSum || !mo.AllowOther || !mo.DefaultPermissions {
		t.Errorf("mount options: %+v", mo)
	}
	if bo.Compress != "zstd" || bo.CompressLevel != 5 || !bo.CompressForce || bo.CommitInterval != 7*time.Second {
		t.Errorf("btrfs options: %+v", bo)
	}
	bo, mo, err = fuse.ParseOptions("compress,rw,subvolid=257,nodatasum")
	if err != nil || bo.Compress != "zlib" || mo.ReadOnly || mo.SubvolID != 257 || !mo.NoDataSum || mo.NoDataCow || bo.NoTreeLog {
		t.Errorf("compress,rw,subvolid=257,nodatasum: %+v %+v %v", bo, mo, err)
	}
	if bo, _, err := fuse.ParseOptions("notreelog"); err != nil || !bo.NoTreeLog {
		t.Errorf("notreelog: %+v %v", bo, err)
	}
	if bo, _, err := fuse.ParseOptions("notreelog,treelog"); err != nil || bo.NoTreeLog {
		t.Errorf("notreelog,treelog: %+v %v", bo, err)
	}
	for _, bad := range []string{"nosuch", "commit=soon", "subvolid=x", "compress=bzip2", "compress=zstd:high"} {
		if _, _, err := fuse.ParseOptions(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
