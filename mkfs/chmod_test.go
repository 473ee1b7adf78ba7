package mkfs

import (
	"archive/tar"
	"io/fs"
	"testing"
	"time"

	"github.com/gobtrfs/btrfs"
)

// TestChmodLikeChmod checks the chmod(1) meanings ParseChmod shares with
// the edit shell's chmod: class copies (g=u once set nothing here), and
// directories keeping their set-id bits under octal modes and "=".
func TestChmodLikeChmod(t *testing.T) {
	cases := []struct {
		spec string
		kind Kind
		in   uint32
		want uint32
	}{
		{"g=u", KindFile, 0o640, 0o660},
		{"g=u", KindDir, 0o750, 0o770},
		{"o=g-x", KindFile, 0o751, 0o754},
		{"ug=o", KindFile, 0o605, 0o555},
		{"Fg=u,Do=u", KindFile, 0o700, 0o770},
		{"Fg=u,Do=u", KindDir, 0o700, 0o707},
		{"D755", KindDir, 0o2700, 0o2755},  // kept, as chmod(1) does
		{"D00755", KindDir, 0o2700, 0o755}, // five digits clear them
		{"F755", KindFile, 0o2700, 0o755},  // files do not keep them
		{"a=rX", KindDir, 0o6700, 0o6555},
		{"a=rXs", KindDir, 0o700, 0o6555},
		{"g-s,g=rx", KindDir, 0o2777, 0o757},
	}
	for _, c := range cases {
		fn, err := ParseChmod(c.spec)
		if err != nil {
			t.Errorf("%q: %v", c.spec, err)
			continue
		}
		if got := fn(c.kind, c.in); got != c.want {
			t.Errorf("%q on %s %04o: %04o, want %04o", c.spec, c.kind, c.in, got, c.want)
		}
	}
	for _, spec := range []string{"g=", "Dg=u"} {
		if _, err := ParseChmod(spec); err != nil {
			t.Errorf("%q: %v", spec, err)
		}
	}
	for _, spec := range []string{"Du", "F", "D8", ",", "g=u,"} {
		if _, err := ParseChmod(spec); err == nil {
			t.Errorf("%q: no error", spec)
		}
	}
}

// TestBuildChmodClassCopy builds an image with Chmod "g=u" (what
// `gobtrfs mkfs --chmod g=u` passes) and reads the modes back with the
// project's reader.
func TestBuildChmodClassCopy(t *testing.T) {
	mt := time.Unix(1700000000, 0)
	b := makeTar(t, []tarMember{
		{hdr: tar.Header{Name: "d/", Typeflag: tar.TypeDir, Mode: 0o750, ModTime: mt}},
		{hdr: tar.Header{Name: "sg/", Typeflag: tar.TypeDir, Mode: 0o2700, ModTime: mt}},
		{hdr: tar.Header{Name: "d/f", Typeflag: tar.TypeReg, Mode: 0o604, ModTime: mt}, data: "x"},
		{hdr: tar.Header{Name: "d/x", Typeflag: tar.TypeReg, Mode: 0o4711, ModTime: mt}, data: "y"},
		{hdr: tar.Header{Name: "d/l", Typeflag: tar.TypeSymlink, Linkname: "f", ModTime: mt}},
	})
	img := buildImage(t, tarOpener(b), BuildOptions{Format: Options{Time: mt}, Chmod: "g=u,Do-rwx"})
	fsys, err := btrfs.Open(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	for p, want := range map[string]fs.FileMode{
		"d":   fs.ModeDir | 0o770,
		"sg":  fs.ModeDir | fs.ModeSetgid | 0o770,
		"d/f": 0o664,
		"d/x": fs.ModeSetuid | 0o771,
		"d/l": fs.ModeSymlink | 0o777,
	} {
		fi, err := fsys.Lstat(p)
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		if fi.Mode() != want {
			t.Errorf("%s: mode %v, want %v", p, fi.Mode(), want)
		}
	}
}
