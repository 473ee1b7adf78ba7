package btrfs_test

import (
	"io/fs"
	"testing"

	"github.com/gobtrfs/btrfs"
)

// TestModeTable checks every file type and every special bit both ways
// against values written out by hand (Linux st_mode from stat(2)).
func TestModeTable(t *testing.T) {
	cases := []struct {
		unix uint32
		fm   fs.FileMode
	}{
		{0o100644, 0o644},
		{0o100000, 0},
		{0o040755, fs.ModeDir | 0o755},
		{0o120777, fs.ModeSymlink | 0o777},
		{0o010600, fs.ModeNamedPipe | 0o600},
		{0o140700, fs.ModeSocket | 0o700},
		{0o020666, fs.ModeDevice | fs.ModeCharDevice | 0o666},
		{0o060660, fs.ModeDevice | 0o660},
		{0o104755, fs.ModeSetuid | 0o755},
		{0o102755, fs.ModeSetgid | 0o755},
		{0o041777, fs.ModeDir | fs.ModeSticky | 0o777},
		{0o047777, fs.ModeDir | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky | 0o777},
		{0o100001, 0o001},
		{0o100400, 0o400},
	}
	for _, tc := range cases {
		if got := btrfs.FileModeOf(tc.unix); got != tc.fm {
			t.Errorf("FileModeOf(%#o) = %v, want %v", tc.unix, got, tc.fm)
		}
		if got := btrfs.UnixMode(tc.fm); got != tc.unix {
			t.Errorf("UnixMode(%v) = %#o, want %#o", tc.fm, got, tc.unix)
		}
	}
}

// TestModeEdges pins the conversions of values outside the seven types.
func TestModeEdges(t *testing.T) {
	from := []struct {
		unix uint32
		want fs.FileMode
	}{
		{0o4755, fs.ModeSetuid | 0o755}, // bare permission value: no type
		{0o7777, fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky | 0o777},
		{0o030644, fs.ModeIrregular | 0o644}, // no Linux type 03
		{0o170000, fs.ModeIrregular},         // all type bits
		{0o1100644, 0o644},                   // bits above the type ignored
	}
	for _, tc := range from {
		if got := btrfs.FileModeOf(tc.unix); got != tc.want {
			t.Errorf("FileModeOf(%#o) = %v, want %v", tc.unix, got, tc.want)
		}
	}
	to := []struct {
		fm   fs.FileMode
		want uint32
	}{
		{fs.ModeIrregular | 0o644, 0o644},
		{fs.ModeCharDevice | 0o644, 0o644}, // char device needs ModeDevice
		{fs.ModeDir | fs.ModeSymlink | 0o755, 0o755},
		{fs.ModeAppend | fs.ModeExclusive | fs.ModeTemporary | 0o600, 0o100600}, // not type bits
	}
	for _, tc := range to {
		if got := btrfs.UnixMode(tc.fm); got != tc.want {
			t.Errorf("UnixMode(%v) = %#o, want %#o", tc.fm, got, tc.want)
		}
	}
}

// TestModeRoundTrip converts every valid st_mode (each type with each of
// the 4096 permission values) there and back.
func TestModeRoundTrip(t *testing.T) {
	types := []uint32{0o100000, 0o040000, 0o120000, 0o010000, 0o140000, 0o020000, 0o060000}
	for _, typ := range types {
		for perm := uint32(0); perm <= 0o7777; perm++ {
			m := btrfs.FileModeOf(typ | perm)
			if got := btrfs.UnixMode(m); got != typ|perm {
				t.Fatalf("UnixMode(FileModeOf(%#o)) = %#o", typ|perm, got)
			}
			if m.Perm() != fs.FileMode(perm&0o777) {
				t.Fatalf("FileModeOf(%#o).Perm() = %v", typ|perm, m.Perm())
			}
		}
	}
}
