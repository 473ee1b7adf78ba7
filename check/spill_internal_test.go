package check

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestSorterSpills: with a limit far below the records' size the sorter
// writes many runs, and the merge gives exactly the sorted multiset an
// in-memory sort gives, leaving no file behind.
func TestSorterSpills(t *testing.T) {
	for _, limit := range []int64{0, 4 << 10, 1 << 30} {
		dir := t.TempDir()
		s := newSorter(limit, dir)
		rng := rand.New(rand.NewPCG(1, uint64(limit)))
		var want [][]byte
		for i := 0; i < 20000; i++ {
			rec := make([]byte, 8+rng.IntN(24))
			binary.BigEndian.PutUint64(rec, rng.Uint64N(5000)) // duplicates
			for j := 8; j < len(rec); j++ {
				rec[j] = byte(rng.IntN(4))
			}
			s.Add(rec)
			want = append(want, rec)
		}
		if limit < 1<<20 && s.Runs() < 10 {
			t.Fatalf("limit %d: %d runs, want many", limit, s.Runs())
		}
		if limit >= 1<<20 && s.Runs() != 0 {
			t.Fatalf("limit %d: %d runs, want none", limit, s.Runs())
		}
		slices.SortFunc(want, bytes.Compare)
		it := s.Merge()
		var got [][]byte
		for rec, ok := it.Next(); ok; rec, ok = it.Next() {
			got = append(got, rec)
		}
		if err := it.Err(); err != nil {
			t.Fatal(err)
		}
		it.Close()
		if len(got) != len(want) {
			t.Fatalf("limit %d: %d records, want %d", limit, len(got), len(want))
		}
		for i := range want {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("limit %d: record %d = %x, want %x", limit, i, got[i], want[i])
			}
		}
		left, _ := os.ReadDir(dir)
		if len(left) != 0 {
			t.Fatalf("limit %d: %d files left in %s", limit, len(left), dir)
		}
	}
}

// TestSorterSpillError: a run that cannot be written is an error from the
// merge, not a panic or a silently short result.
func TestSorterSpillError(t *testing.T) {
	s := newSorter(0, filepath.Join(t.TempDir(), "missing"))
	for i := 0; i < 1000; i++ {
		s.Add([]byte{byte(i), byte(i >> 8)})
	}
	it := s.Merge()
	defer it.Close()
	if _, ok := it.Next(); ok || it.Err() == nil {
		t.Fatalf("merge after a failed spill: ok=%v err=%v", ok, it.Err())
	}
}
