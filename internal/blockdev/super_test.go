package blockdev_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/gobtrfs/btrfs/internal/blockdev"
	"github.com/gobtrfs/btrfs/internal/disk"
)

func TestReadSuperCopies(t *testing.T) {
	for _, ct := range []disk.CsumType{disk.CsumCRC32C, disk.CsumXXHash, disk.CsumSHA256, disk.CsumBlake2} {
		d := blockdev.NewMem(300 << 20) // copies 0 and 1 fit, copy 2 (256 GiB) does not
		ts := testSuper{fsid: disk.UUID{1}, devid: 1, gen: 7, csum: ct}
		ts.writeSupers(t, d)
		for i := range 2 {
			s, raw, err := blockdev.ReadSuper(d, i)
			if err != nil {
				t.Fatalf("%s copy %d: %v", ct, i, err)
			}
			if s.Generation != 7 || s.Bytenr != disk.SuperblockOffsetOf(i) || len(raw) != disk.SuperblockSize {
				t.Fatalf("%s copy %d: gen %d bytenr %d", ct, i, s.Generation, s.Bytenr)
			}
		}
		if _, _, err := blockdev.ReadSuper(d, 2); !errors.Is(err, blockdev.ErrNoSuper) {
			t.Fatalf("copy 2 beyond end: %v", err)
		}
	}
}

func TestReadSuperErrors(t *testing.T) {
	ts := testSuper{fsid: disk.UUID{1}, devid: 1, gen: 7}
	cases := []struct {
		name  string
		patch func(b []byte)
		want  string
	}{
		{"magic", func(b []byte) { b[0x40] = 0 }, "bad magic"},
		{"csum", func(b []byte) { b[0x100] ^= 1 }, "checksum mismatch"},
		{"csumtype", func(b []byte) { b[0xc4] = 9 }, "unknown checksum type"},
		{"bytenr", func(b []byte) { b[0x30] = 1; disk.CsumCRC32C.SumBlock(b) }, "bytenr"},
		{"nodesize", func(b []byte) { b[0x94] = 3; disk.CsumCRC32C.SumBlock(b) }, "nodesize"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := blockdev.NewMem(1 << 20)
			b := ts.encode(0)
			tc.patch(b)
			d.WriteAt(b, disk.SuperblockOffset)
			_, _, err := blockdev.ReadSuper(d, 0)
			if !errors.Is(err, disk.ErrCorrupt) {
				t.Fatalf("want corrupt error, got %v", err)
			}
			msg := err.Error()
			if !strings.Contains(msg, tc.want) || !strings.Contains(msg, "copy 0") || !strings.Contains(msg, "65536") {
				t.Fatalf("error %q should name %q, the copy and the offset", msg, tc.want)
			}
		})
	}
	if _, _, err := blockdev.ReadSuper(blockdev.NewMem(4096), 0); !errors.Is(err, blockdev.ErrNoSuper) {
		t.Fatalf("tiny device: %v", err)
	}
	f := blockdev.NewFaulty(blockdev.NewMem(1 << 20))
	f.FailAt(blockdev.OpRead, 1, false)
	if _, _, err := blockdev.ReadSuper(f, 0); !errors.Is(err, blockdev.ErrInjected) {
		t.Fatalf("read error not passed on: %v", err)
	}
}

func TestReadBestAndPrimarySuper(t *testing.T) {
	d := blockdev.NewMem(300 << 20)
	old := testSuper{fsid: disk.UUID{1}, devid: 1, gen: 7}
	newer := old
	newer.gen = 9
	d.WriteAt(old.encode(0), int64(disk.SuperblockOffsetOf(0)))
	d.WriteAt(newer.encode(1), int64(disk.SuperblockOffsetOf(1)))

	s, _, i, err := blockdev.ReadBestSuper(d)
	if err != nil || i != 1 || s.Generation != 9 {
		t.Fatalf("best: copy %d gen %v err %v", i, s, err)
	}
	s, _, i, err = blockdev.ReadPrimarySuper(d, false)
	if err != nil || i != 0 || s.Generation != 7 {
		t.Fatalf("primary: copy %d err %v", i, err)
	}
	// Break the primary: without fallback it fails, with fallback copy 1 wins.
	d.WriteAt(make([]byte, 8), disk.SuperblockOffset+0x40)
	if _, _, _, err := blockdev.ReadPrimarySuper(d, false); !errors.Is(err, disk.ErrCorrupt) {
		t.Fatalf("broken primary without fallback: %v", err)
	}
	s, _, i, err = blockdev.ReadPrimarySuper(d, true)
	if err != nil || i != 1 || s.Generation != 9 {
		t.Fatalf("fallback: copy %d err %v", i, err)
	}
	// Break every copy: the error explains each.
	d.WriteAt(make([]byte, 8), int64(disk.SuperblockOffsetOf(1))+0x40)
	_, _, _, err = blockdev.ReadBestSuper(d)
	if err == nil || !strings.Contains(err.Error(), "copy 0") || !strings.Contains(err.Error(), "copy 1") {
		t.Fatalf("no valid copy: %v", err)
	}
}

func FuzzReadSuper(f *testing.F) {
	ts := testSuper{fsid: disk.UUID{1}, devid: 1, gen: 7}
	f.Add(ts.encode(0))
	f.Add(make([]byte, 100))
	f.Fuzz(func(t *testing.T, b []byte) {
		d := blockdev.NewMem(disk.SuperblockOffset + disk.SuperblockSize)
		if len(b) > disk.SuperblockSize {
			b = b[:disk.SuperblockSize]
		}
		d.WriteAt(b, disk.SuperblockOffset)
		s, _, err := blockdev.ReadSuper(d, 0)
		if err == nil && s.Magic != disk.Magic {
			t.Fatal("accepted a superblock without magic")
		}
		if err != nil && !errors.Is(err, disk.ErrCorrupt) {
			t.Fatalf("non-corrupt error for bad bytes: %v", err)
		}
	})
}
