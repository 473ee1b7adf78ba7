package mkfs

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// collect reads every entry of src, with each file's data.
func collect(t *testing.T, src Source) ([]*Entry, map[string][]byte) {
	t.Helper()
	var out []*Entry
	data := map[string][]byte{}
	for {
		e, err := src.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := e.validate(DefaultNodeSize); err != nil {
			t.Errorf("%s: %v", e.Path, err)
		}
		if e.Open != nil {
			r, err := e.Open()
			if err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(r)
			if err != nil {
				t.Fatal(err)
			}
			data[e.Path] = b
			e.Open = nil
		}
		out = append(out, e)
	}
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}
	return out, data
}

func byPath(es []*Entry) map[string]*Entry {
	m := map[string]*Entry{}
	for _, e := range es {
		m[e.Path] = e
	}
	return m
}

// tarMember is one member for a test archive.
type tarMember struct {
	hdr  tar.Header
	data string
}

func makeTar(t testing.TB, ms []tarMember) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, m := range ms {
		h := m.hdr
		h.Size = int64(len(m.data))
		if h.Format == 0 {
			h.Format = tar.FormatPAX
		}
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(m.data)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestSourceTar(t *testing.T) {
	mt := time.Unix(1600000000, 987654321)
	ms := []tarMember{
		{hdr: tar.Header{Name: "./", Typeflag: tar.TypeDir, Mode: 0o755, ModTime: mt}},
		{hdr: tar.Header{Name: "x/y/file", Typeflag: tar.TypeReg, Mode: 0o4755, Uid: 1000, Gid: 1000, ModTime: mt,
			PAXRecords: map[string]string{"SCHILY.xattr.user.a": "1", "SCHILY.xattr.trusted.b": "\x00\x01"}}, data: "content"},
		{hdr: tar.Header{Name: "x/hard", Typeflag: tar.TypeLink, Linkname: "x/y/file"}},
		{hdr: tar.Header{Name: "/abs/sym", Typeflag: tar.TypeSymlink, Linkname: "/target", ModTime: mt}},
		{hdr: tar.Header{Name: "dev/null", Typeflag: tar.TypeChar, Mode: 0o666, Devmajor: 1, Devminor: 3, ModTime: mt}},
		{hdr: tar.Header{Name: "dev/sda", Typeflag: tar.TypeBlock, Mode: 0o660, Devmajor: 8, Devminor: 0, ModTime: mt}},
		{hdr: tar.Header{Name: "gnu", Typeflag: tar.TypeFifo, Mode: 0o600, ModTime: time.Unix(1600000000, 0), Format: tar.FormatGNU}},
	}
	es, data := collect(t, NewTarSource(bytes.NewReader(makeTar(t, ms))))
	m := byPath(es)
	if len(es) != len(ms) {
		t.Fatalf("%d entries, want %d", len(es), len(ms))
	}
	f := m["x/y/file"]
	if f == nil || f.Kind != KindFile || f.Perm != 0o4755 || f.UID != 1000 || f.GID != 1000 || !f.Mtime.Equal(mt) ||
		string(data["x/y/file"]) != "content" || f.Size != 7 {
		t.Fatalf("x/y/file: %+v", f)
	}
	wantX := []Xattr{{"trusted.b", []byte{0, 1}}, {"user.a", []byte("1")}}
	if d := cmp.Diff(wantX, f.Xattrs); d != "" {
		t.Errorf("xattrs (-want +got):\n%s", d)
	}
	if h := m["x/hard"]; h == nil || h.Kind != KindHardlink || h.LinkOf != "x/y/file" {
		t.Errorf("x/hard: %+v", h)
	}
	if s := m["abs/sym"]; s == nil || s.Target != "/target" {
		t.Errorf("abs/sym: %+v", s)
	}
	if d := m["dev/null"]; d == nil || d.Kind != KindCharDev || d.DevMajor != 1 || d.DevMinor != 3 {
		t.Errorf("dev/null: %+v", d)
	}
	if d := m["dev/sda"]; d == nil || d.Kind != KindBlockDev || d.DevMajor != 8 {
		t.Errorf("dev/sda: %+v", d)
	}
	if r := m["."]; r == nil || r.Kind != KindDir {
		t.Errorf("root: %+v", r)
	}
	if g := m["gnu"]; g == nil || g.Kind != KindFifo {
		t.Errorf("gnu: %+v", g)
	}
}

func TestSourceCleanPath(t *testing.T) {
	long := strings.Repeat("n", 255)
	for in, want := range map[string]string{"a/b": "a/b", "./a//b/": "a/b", "/": ".", "./": ".", "/x": "x", long: long} {
		got, err := CleanPath(in)
		if err != nil || got != want {
			t.Errorf("CleanPath(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"a/../b", "..", "a\x00b", long + "x", "d/" + long + "x/e"} {
		if _, err := CleanPath(in); !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), "\"") {
			t.Errorf("CleanPath(%q): err %v, want ErrInput naming the path", in, err)
		}
	}
}

func TestSourceValidate(t *testing.T) {
	max4k := MaxSymlinkTarget(4096)
	if max4k <= 0 || max4k >= 4096 || MaxSymlinkTarget(65536) != 4095 {
		t.Fatalf("MaxSymlinkTarget: %d, %d", max4k, MaxSymlinkTarget(65536))
	}
	bad := []*Entry{
		{Path: "s", Kind: KindSymlink, Target: strings.Repeat("t", max4k+1)},
		{Path: "s", Kind: KindSymlink},
		{Path: ".", Kind: KindFile},
		{Path: "a/", Kind: KindDir},
		{Path: "f", Kind: KindFile, Size: 10, Segments: []Segment{{5, 6}}, Open: func() (io.ReadCloser, error) { return nil, nil }},
		{Path: "f", Kind: KindFile, Size: 10, Segments: []Segment{{0, 4}, {2, 4}}, Open: func() (io.ReadCloser, error) { return nil, nil }},
		{Path: "f", Kind: KindFile, Size: 10, Segments: []Segment{{0, 4}}},
		{Path: "h", Kind: KindHardlink, LinkOf: "../x"},
		{Path: "x", Kind: 0},
		{Path: "x", Kind: KindFifo, Xattrs: []Xattr{{Name: strings.Repeat("x", 256)}}},
	}
	for i, e := range bad {
		if err := e.validate(4096); !errors.Is(err, ErrInput) {
			t.Errorf("%d: %+v: err %v, want ErrInput", i, e, err)
		}
	}
	ok := &Entry{Path: "s", Kind: KindSymlink, Target: strings.Repeat("t", max4k)}
	if err := ok.validate(4096); err != nil {
		t.Error(err)
	}
}

func TestSourceChmod(t *testing.T) {
	cases := []struct {
		spec string
		kind Kind
		in   uint32
		want uint32
	}{
		{"644", KindFile, 0o755, 0o644},
		{"D755,F644", KindDir, 0o700, 0o755},
		{"D755,F644", KindFile, 0o4700, 0o644},
		{"go-w", KindFile, 0o666, 0o644},
		{"a+rX", KindDir, 0o700, 0o755},
		{"a+rX", KindFile, 0o600, 0o644},
		{"a+rX", KindFile, 0o700, 0o755},
		{"u=rw,g=r,o=", KindFile, 0o4777, 0o640},
		{"u+s,+t", KindFile, 0o755, 0o5755},
		{"Fa-x", KindDir, 0o755, 0o755},
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
	for _, spec := range []string{"", "9", "u", "u+q", "D", "77777", "a+r,"} {
		if _, err := ParseChmod(spec); err == nil {
			t.Errorf("%q: no error", spec)
		}
	}
}

// FuzzSourceTar feeds arbitrary bytes to the tar source: it must return
// entries or errors, never panic, and every entry it returns must either
// validate or be refused with ErrInput.
func FuzzSourceTar(f *testing.F) {
	f.Add(makeTar(f, []tarMember{
		{hdr: tar.Header{Name: "a", Typeflag: tar.TypeReg, Mode: 0o644, PAXRecords: map[string]string{"SCHILY.xattr.user.x": "y"}}, data: "data"},
		{hdr: tar.Header{Name: "d/", Typeflag: tar.TypeDir, Mode: 0o755}},
		{hdr: tar.Header{Name: "l", Typeflag: tar.TypeLink, Linkname: "a"}},
		{hdr: tar.Header{Name: "c", Typeflag: tar.TypeChar, Devmajor: 4, Devminor: 5, Format: tar.FormatGNU}},
	}))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		s := NewTarSource(bytes.NewReader(b))
		for i := 0; i < 1000; i++ {
			e, err := s.Next()
			if err != nil {
				return
			}
			if err := e.validate(4096); err != nil && !errors.Is(err, ErrInput) {
				t.Fatalf("%q: %v", e.Path, err)
			}
			if e.Open != nil {
				r, err := e.Open()
				if err != nil {
					t.Fatal(err)
				}
				if _, err := io.Copy(io.Discard, io.LimitReader(r, e.DataBytes())); err != nil {
					return
				}
			}
		}
	})
}

// FuzzSourceChmod checks that ParseChmod never panics and that what it
// accepts only yields mode bits.
func FuzzSourceChmod(f *testing.F) {
	for _, s := range []string{"644", "D755,F644", "u+rwX,go-w", "a=rX", "Fu+s", "+t"} {
		f.Add(s, uint32(0o755))
	}
	f.Fuzz(func(t *testing.T, spec string, perm uint32) {
		fn, err := ParseChmod(spec)
		if err != nil {
			return
		}
		for _, k := range []Kind{KindFile, KindDir} {
			if got := fn(k, perm&0o7777); got&^0o7777 != 0 {
				t.Fatalf("%q: %o", spec, got)
			}
		}
	})
}

// FuzzSourceCleanPath checks that every path CleanPath accepts stays
// inside the root and is made of storable names.
func FuzzSourceCleanPath(f *testing.F) {
	for _, s := range []string{"a/b", "./x//y/", "/", "..", "a/../b", strings.Repeat("n", 256)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		c, err := CleanPath(p)
		if err != nil {
			if !errors.Is(err, ErrInput) {
				t.Fatalf("%q: untyped error %v", p, err)
			}
			return
		}
		if c == "." {
			return
		}
		for _, part := range strings.Split(c, "/") {
			if part == "" || part == "." || part == ".." || len(part) > 255 || strings.IndexByte(part, 0) >= 0 {
				t.Fatalf("CleanPath(%q) = %q: bad component %q", p, c, part)
			}
		}
	})
}
