//go:build linux

package blockdev

import (
	"bytes"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestFileDirectWrites writes large aligned pieces (direct, where the
// filesystem allows O_DIRECT) mixed with small and unaligned ones
// (buffered) over the same ranges, in both orders, and reads back through
// the buffered descriptor and a fresh open: every read sees the last
// write, so the two paths stay coherent. With direct writes switched off
// (as after EINVAL) everything is buffered and as right.
func TestFileDirectWrites(t *testing.T) {
	type run struct {
		dir string
		off bool // direct writes disabled
	}
	runs := []run{{t.TempDir(), false}, {t.TempDir(), true}}
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		runs = append(runs, run{"/dev/shm", false})
	}
	for _, r := range runs {
		t.Run(fmt.Sprintf("%s/disabled=%v", r.dir, r.off), func(t *testing.T) {
			d, err := os.MkdirTemp(r.dir, "direct")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(d) })
			path := filepath.Join(d, "img")
			const size = 64 << 20
			f, err := CreateFile(path, size)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if r.off {
				f.dio.disable()
			}
			want := make([]byte, size)
			rng := rand.New(rand.NewSource(1))
			write := func(off, n int) {
				p := make([]byte, n)
				rng.Read(p)
				if k, err := f.WriteAt(p, int64(off)); err != nil || k != n {
					t.Fatalf("WriteAt(%d bytes at %d) = %d, %v", n, off, k, err)
				}
				copy(want[off:], p)
			}
			write(1<<20, 4096)            // buffered
			write(0, 12<<20)              // direct over it (more than one bounce buffer)
			write(5<<20+100, 1000)        // buffered inside the direct range
			write(4<<20, 1<<20)           // direct over that
			write(20<<20, directMin-4096) // too small: buffered
			write(30<<20+512, 1<<20)      // unaligned: buffered
			got := make([]byte, size)
			if _, err := f.ReadAt(got, 0); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatal("buffered read differs from what was written")
			}
			if err := f.Sync(); err != nil {
				t.Fatal(err)
			}
			disk, err := os.ReadFile(path)
			if err != nil || !bytes.Equal(disk, want) {
				t.Fatalf("file content differs from what was written (%v)", err)
			}
			// Whether the filesystem takes O_DIRECT at all decides how
			// many writes may have gone direct.
			supported := false
			if g, err := os.OpenFile(path, os.O_WRONLY|unix.O_DIRECT, 0); err == nil {
				supported = true
				g.Close()
			}
			want2 := 0
			if supported && !r.off {
				want2 = 2
			}
			if n := f.dio.count(); n != want2 {
				t.Fatalf("%d direct writes, want %d (O_DIRECT supported: %v)", n, want2, supported)
			}
		})
	}
}
