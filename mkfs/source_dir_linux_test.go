package mkfs

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

func TestSourceDir(t *testing.T) {
	root := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(root, "b/c"), 0o750))
	must(os.WriteFile(filepath.Join(root, "a"), []byte("hello"), 0o644))
	f, err := os.Create(filepath.Join(root, "b/holes"))
	must(err)
	_, err = f.WriteAt(bytes.Repeat([]byte{1}, 4096), 1<<20)
	must(err)
	must(f.Truncate(3 << 20))
	must(f.Close())
	must(os.Link(filepath.Join(root, "a"), filepath.Join(root, "b/c/link")))
	must(os.Symlink("../a", filepath.Join(root, "b/sym")))
	must(unix.Mkfifo(filepath.Join(root, "fifo"), 0o600))
	must(unix.Setxattr(filepath.Join(root, "a"), "user.k", []byte("v\x00w"), 0))
	mt := time.Unix(1234567890, 123456789)
	must(os.Chtimes(filepath.Join(root, "a"), mt, mt))

	s, err := OpenDir(root)
	must(err)
	es, data := collect(t, s)
	var order []string
	for _, e := range es {
		order = append(order, e.Path)
	}
	want := []string{".", "a", "b", "b/c", "b/c/link", "b/holes", "b/sym", "fifo"}
	if d := cmp.Diff(want, order); d != "" {
		t.Fatalf("walk order (-want +got):\n%s", d)
	}
	m := byPath(es)
	if a := m["a"]; a.Kind != KindFile || a.Perm != 0o644 || !a.Mtime.Equal(mt) || string(data["a"]) != "hello" ||
		len(a.Xattrs) != 1 || string(a.Xattrs[0].Value) != "v\x00w" {
		t.Errorf("a: %+v data %q", a, data["a"])
	}
	if l := m["b/c/link"]; l.Kind != KindHardlink || l.LinkOf != "a" {
		t.Errorf("b/c/link: %+v", l)
	}
	if h := m["b/holes"]; h.Size != 3<<20 || len(h.Segments) != 1 || h.Segments[0] != (Segment{1 << 20, 4096}) || len(data["b/holes"]) != 4096 {
		t.Errorf("b/holes: size %d segments %v, %d data bytes", h.Size, h.Segments, len(data["b/holes"]))
	}
	if y := m["b/sym"]; y.Kind != KindSymlink || y.Target != "../a" {
		t.Errorf("b/sym: %+v", y)
	}
	if p := m["fifo"]; p.Kind != KindFifo || p.Perm != 0o600 {
		t.Errorf("fifo: %+v", p)
	}
	if d := m["b"]; d.Kind != KindDir || d.Perm != 0o750 {
		t.Errorf("b: %+v", d)
	}
	// A symlink to the root directory is followed for the root only.
	link := filepath.Join(t.TempDir(), "link")
	must(os.Symlink(root, link))
	s, err = OpenDir(link)
	must(err)
	es, _ = collect(t, s)
	if len(es) != len(want) || es[0].Kind != KindDir || es[0].Perm != m["."].Perm {
		t.Errorf("via a symlink: %d entries, root %+v", len(es), es[0])
	}
}

// TestMkdevMatchesHost checks mkdev against the host's encoding on Linux,
// where the two must agree.
func TestMkdevMatchesHost(t *testing.T) {
	for _, v := range []uint32{0, 1, 0xff, 0x100, 0xfff, 0x1000, 0xfffff, 0x100000, 0xffffffff} {
		for _, w := range []uint32{0, 3, 0xff, 0x100, 0xfffff, 0x100000, 0xffffffff} {
			if got, want := mkdev(v, w), unix.Mkdev(v, w); got != want {
				t.Errorf("mkdev(%#x, %#x) = %#x, unix.Mkdev %#x", v, w, got, want)
			}
		}
	}
}
