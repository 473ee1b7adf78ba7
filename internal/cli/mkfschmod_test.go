package cli

import (
	"io/fs"
	"path/filepath"
	"testing"

	"github.com/gobtrfs/btrfs"
)

// TestMkfsChmodClassCopy runs `mkfs --chmod g=u,Fo-w` (class copies once
// set nothing in mkfs, unlike chmod(1) and the edit shell's chmod) and
// reads the modes back with the project's reader.
func TestMkfsChmodClassCopy(t *testing.T) {
	img := filepath.Join(t.TempDir(), "img")
	_, stderr, code := runIn(t, mkfsTar(t), "mkfs", "--size", "256M", "--tar", "-", "--chmod", "g=u,Fo-w", img)
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	fsys, err := btrfs.Open(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	for p, want := range map[string]fs.FileMode{
		"etc/hosts": 0o664,
		"dev/null":  fs.ModeDevice | fs.ModeCharDevice | 0o664,
	} {
		fi, err := fsys.Lstat(p)
		if err != nil {
			t.Errorf("%s: %v", p, err)
		} else if fi.Mode() != want {
			t.Errorf("%s: mode %v, want %v", p, fi.Mode(), want)
		}
	}
}
