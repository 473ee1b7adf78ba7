package cli

import (
	"errors"
	"io/fs"
	"testing"

	"github.com/gobtrfs/btrfs"
)

// TestEditMvLnIntoLinkedDir checks that mv and ln treat a symbolic link to
// a directory as that directory, as coreutils does (review finding: they
// used to fail with ENOTDIR because Rename and Link do not follow it), and
// that a link to a file or a dangling link is still replaced or refused
// as before.
func TestEditMvLnIntoLinkedDir(t *testing.T) {
	img := editImage(t)
	script := `mkdir -p d/sub
touch a b c f target
ln -s d ld
ln -s sub d/lsub
ln -s /d/lsub labs
ln -s nowhere dangling
ln -s f lf
mv a ld
mv b c labs
ln target ld
ln -s text labs
mv f dangling
`
	if out, stderr, code := runEdit(t, img, script); code != ExitOK {
		t.Fatalf("exit %d: %s%s", code, out, stderr)
	}
	fsys, err := btrfs.Open(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	want := map[string]fs.FileMode{
		"d/a":        0,
		"d/sub/b":    0,
		"d/sub/c":    0,
		"d/target":   0,
		"d/sub/text": fs.ModeSymlink,
		"ld":         fs.ModeSymlink,
		"labs":       fs.ModeSymlink,
		"dangling":   0, // f replaced the dangling link
		"lf":         fs.ModeSymlink,
	}
	for p, typ := range want {
		fi, err := fsys.Lstat(p)
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		if fi.Mode().Type() != typ {
			t.Errorf("%s: mode %v, want type %v", p, fi.Mode(), typ)
		}
	}
	for _, p := range []string{"a", "b", "c", "f"} {
		if _, err := fsys.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: %v, want it moved away", p, err)
		}
	}
	if fi, err := fsys.Lstat("target"); err != nil || fi.Sys().(*btrfs.Stat).Nlink != 2 {
		t.Errorf("target: %v, %v: want a second link in d", fi, err)
	}
	// Several sources need a directory, and a link to a file is none.
	_, stderr, code := runEdit(t, img, "touch x y\nmv x y lf\n")
	if code != ExitFailure {
		t.Errorf("mv x y lf: exit %d, %q", code, stderr)
	}
}
