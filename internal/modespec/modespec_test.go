package modespec

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestApply(t *testing.T) {
	for _, tc := range []struct {
		mode  string
		old   uint32
		dir   bool
		want  uint32
		octal bool
	}{
		{"755", 0o4644, false, 0o755, true},
		{"755", 0o2700, true, 0o2755, true},
		{"00755", 0o2700, true, 0o755, true},
		{"4000", 0o777, false, 0o4000, true},
		{"u+x", 0o644, false, 0o744, false},
		{"go-w", 0o666, false, 0o644, false},
		{"+w", 0o444, false, 0o666, false},
		{"=", 0o777, false, 0, false},
		{"a+X", 0o644, true, 0o755, false},
		{"a+X", 0o644, false, 0o644, false},
		{"a+X", 0o744, false, 0o755, false},
		{"g=u", 0o750, false, 0o770, false},
		{"o=g-x", 0o751, false, 0o754, false},
		{"u=rw,go=r", 0o4777, false, 0o644, false},
		{"a=r", 0o2777, true, 0o2444, false},
		{"a=rs", 0o777, true, 0o6444, false},
		{"u+t", 0o644, false, 0o644, false},
		{"o+t", 0o644, false, 0o1644, false},
		{"g=x=", 0o777, false, 0o707, false},
	} {
		m, err := Parse(tc.mode)
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.mode, err)
			continue
		}
		if m.Octal() != tc.octal {
			t.Errorf("Parse(%q).Octal() = %v", tc.mode, m.Octal())
		}
		if got := m.Apply(tc.old, tc.dir); got != tc.want {
			t.Errorf("%q on %o (dir %v) = %o, want %o", tc.mode, tc.old, tc.dir, got, tc.want)
		}
	}
	for _, s := range []string{"", "u", "u+q", "77777", "8", "a+r,", ",", "u+x g-w", "-7"} {
		if _, err := Parse(s); !errors.Is(err, ErrSyntax) {
			t.Errorf("Parse(%q): %v, want ErrSyntax", s, err)
		}
	}
}

// TestLikeChmod compares Apply with chmod(1) on host files and
// directories, run with umask 0 (what these modes assume).
func TestLikeChmod(t *testing.T) {
	if _, err := exec.LookPath("chmod"); err != nil {
		t.Skip("no chmod")
	}
	dir := t.TempDir()
	modes := []string{"755", "0755", "00755", "2755", "4000", "u+x", "go-w", "a=r", "u+s", "g+s,+t", "+w",
		"=", "a+X", "g=u", "o=g-x", "u=rw,go=r", "u+t", "o+t", "a-x,u+X", "=rX", "ug=o", "u-s+x",
		"g-s,g=rx", "u=s", "ug=rwxs", "a=", "u=g,g-s", "g=x=", "o=u+t"}
	starts := []uint32{0o644, 0o7777, 0o2755, 0o4711, 0o1600, 0}
	for _, kind := range []string{"file", "dir"} {
		p := filepath.Join(dir, kind)
		var err error
		if kind == "dir" {
			err = os.Mkdir(p, 0o755)
		} else {
			err = os.WriteFile(p, nil, 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, start := range starts {
			for _, mode := range modes {
				sh := fmt.Sprintf("umask 0 && chmod 0%04o %s && chmod -- %s %s && stat -c %%a %s", start, p, mode, p, p)
				out, err := exec.Command("sh", "-c", sh).CombinedOutput()
				if err != nil {
					t.Fatalf("%s: %v\n%s", sh, err, out)
				}
				want, _ := strconv.ParseUint(strings.TrimSpace(string(out)), 8, 32)
				m, err := Parse(mode)
				if err != nil {
					t.Errorf("Parse(%q): %v", mode, err)
					continue
				}
				if got := m.Apply(start, kind == "dir"); got != uint32(want) {
					t.Errorf("chmod %s on a %s with mode %04o: got %04o, chmod(1) gives %04o", mode, kind, start, got, want)
				}
			}
		}
	}
}

// FuzzParse checks that Parse never panics, that its errors wrap
// ErrSyntax, and that what it accepts yields only mode bits.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"755", "00755", "u+x,go-w", "a=rX", "g=u", "o=g-x", "+t", "u=s", "", "7777777"} {
		f.Add(s, uint32(0o2755))
	}
	f.Fuzz(func(t *testing.T, s string, old uint32) {
		m, err := Parse(s)
		if err != nil {
			if !errors.Is(err, ErrSyntax) {
				t.Fatalf("Parse(%q): %v does not wrap ErrSyntax", s, err)
			}
			return
		}
		for _, dir := range []bool{false, true} {
			if got := m.Apply(old, dir); got&^0o7777 != 0 {
				t.Fatalf("%q on %o (dir %v) = %o", s, old, dir, got)
			}
		}
	})
}
