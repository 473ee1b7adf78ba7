package mkfs

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// TestSourceDirPortable walks a tree made with portable calls only, so it
// runs on every host: walk order, kinds, data, times, hardlinks, and the
// modes the host gives (Windows: the fixed ones DirSource documents).
func TestSourceDirPortable(t *testing.T) {
	root := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(root, "d", "e"), 0o755))
	must(os.WriteFile(filepath.Join(root, "f"), []byte("data"), 0o644))
	must(os.WriteFile(filepath.Join(root, "d", "ro"), []byte("x"), 0o444))
	must(os.WriteFile(filepath.Join(root, "empty"), nil, 0o644))
	must(os.Link(filepath.Join(root, "f"), filepath.Join(root, "d", "e", "link")))
	mt := time.Unix(1234567890, 0)
	must(os.Chtimes(filepath.Join(root, "f"), mt, mt))

	s, err := OpenDir(root)
	must(err)
	defer s.Close()
	es, data := collect(t, s)
	var order []string
	for _, e := range es {
		order = append(order, e.Path)
	}
	want := []string{".", "d", "d/e", "d/e/link", "d/ro", "empty", "f"}
	if len(order) != len(want) {
		t.Fatalf("walk order %q, want %q", order, want)
	}
	for i := range want {
		if order[i] != want[i] {
			t.Fatalf("walk order %q, want %q", order, want)
		}
	}
	m := byPath(es)
	// The first name of a hardlinked file in walk order carries the data.
	if l := m["d/e/link"]; l.Kind != KindFile || string(data["d/e/link"]) != "data" || !l.Mtime.Equal(mt) {
		t.Errorf("d/e/link: %+v data %q", l, data["d/e/link"])
	}
	if f := m["f"]; f.Kind != KindHardlink || f.LinkOf != "d/e/link" {
		t.Errorf("f: %+v, want a hardlink to d/e/link", f)
	}
	if e := m["empty"]; e.Kind != KindFile || e.Size != 0 || len(e.Segments) != 0 {
		t.Errorf("empty: %+v", e)
	}
	wantPerm := map[string]uint32{"d": 0o755, "d/ro": 0o444, "empty": 0o644}
	if runtime.GOOS != "windows" {
		// The umask may have cleared bits; compare with what the host says.
		for p := range wantPerm {
			fi, err := os.Lstat(filepath.Join(root, p))
			must(err)
			wantPerm[p] = uint32(fi.Mode().Perm())
		}
	}
	for p, perm := range wantPerm {
		if m[p].Perm != perm {
			t.Errorf("%s: mode %#o, want %#o", p, m[p].Perm, perm)
		}
	}
	if m["d"].Kind != KindDir || m["d/ro"].Kind != KindFile {
		t.Errorf("kinds: d %v, d/ro %v", m["d"].Kind, m["d/ro"].Kind)
	}
}

// TestMkdevLinuxEncoding pins the Linux user-space dev_t layout that
// btrfs.FS.Mknod decodes, whatever the host's own encoding is.
func TestMkdevLinuxEncoding(t *testing.T) {
	for _, c := range []struct {
		major, minor uint32
		want         uint64
	}{
		{0, 0, 0},
		{1, 3, 0x103},
		{8, 1, 0x801},
		{259, 70000, 0x11110370},
		{0xfff, 0xfffff, 0xffffffff},
		{0xfffff000, 0, 0xfffff000 << 32},
		{0, 0xfff00000, 0xfff00000 << 12},
	} {
		if got := mkdev(c.major, c.minor); got != c.want {
			t.Errorf("mkdev(%d, %d) = %#x, want %#x", c.major, c.minor, got, c.want)
		}
	}
}
