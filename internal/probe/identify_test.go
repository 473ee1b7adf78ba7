package probe

import (
	"bytes"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// image returns a 1 MiB zeroed image with the given bytes written at
// their offsets.
func image(parts map[int64]string) *bytes.Reader {
	b := make([]byte, 1<<20)
	for off, s := range parts {
		copy(b[off:], s)
	}
	return bytes.NewReader(b)
}

func le16(v uint16) string { return string(binary.LittleEndian.AppendUint16(nil, v)) }
func le32(v uint32) string { return string(binary.LittleEndian.AppendUint32(nil, v)) }

// TestIdentifyByMagic places each format's magic where its documentation
// puts it.
func TestIdentifyByMagic(t *testing.T) {
	mbrEntry := "\x00\x00\x02\x00\x83" // bootable flag 0, CHS, type 0x83 (Linux)
	for _, tc := range []struct {
		name  string
		parts map[int64]string
		want  string
	}{
		{"btrfs", map[int64]string{0x10040: "_BHRfS_M"}, "btrfs"},
		{"ext2", map[int64]string{1024 + 0x38: le16(0xEF53)}, "ext2"},
		{"ext3", map[int64]string{1024 + 0x38: le16(0xEF53), 1024 + 0x5C: le32(4)}, "ext3"},
		{"ext4", map[int64]string{1024 + 0x38: le16(0xEF53), 1024 + 0x5C: le32(4), 1024 + 0x60: le32(0x2c2)}, "ext4"},
		{"xfs", map[int64]string{0: "XFSB"}, "xfs"},
		{"vfat16", map[int64]string{54: "FAT16   ", 510: "\x55\xaa"}, "vfat"},
		{"vfat32", map[int64]string{82: "FAT32   ", 510: "\x55\xaa"}, "vfat"},
		{"ntfs", map[int64]string{3: "NTFS    ", 510: "\x55\xaa"}, "ntfs"},
		{"swap", map[int64]string{4086: "SWAPSPACE2"}, "swap"},
		{"swap64k", map[int64]string{65526: "SWAPSPACE2"}, "swap"},
		{"luks", map[int64]string{0: "LUKS\xba\xbe\x00\x02"}, "crypto_LUKS"},
		{"gpt", map[int64]string{446: mbrEntry[:0] + "\x00\x00\x02\x00\xee", 510: "\x55\xaa", 512: "EFI PART"}, "gpt"},
		{"mbr", map[int64]string{446: mbrEntry, 510: "\x55\xaa"}, "dos"},
		{"iso9660", map[int64]string{0x8000: "\x01CD001\x01"}, "iso9660"},
		{"squashfs", map[int64]string{0: "hsqs"}, "squashfs"},
		{"zstd", map[int64]string{0: "\x28\xb5\x2f\xfd"}, "zstd"},
		{"qcow2", map[int64]string{0: "QFI\xfb"}, "qcow2"},
		{"tar", map[int64]string{257: "ustar\x0000"}, "tar"},
	} {
		f, ok := Identify(image(tc.parts), 1<<20)
		if !ok || f.Type != tc.want || f.What == "" {
			t.Errorf("%s: %+v %v, want %s", tc.name, f, ok, tc.want)
		}
	}
	z := image(nil)
	if f, ok := Identify(z, 1<<20); ok {
		t.Errorf("zeros identified as %+v", f)
	}
	if !Zero(z, 1<<20) || Zero(image(map[int64]string{70000: "x"}), 1<<20) {
		t.Errorf("Zero is wrong")
	}
	// A boot signature alone (no partition entry, no FAT) is nothing.
	if f, ok := Identify(image(map[int64]string{510: "\x55\xaa"}), 1<<20); ok {
		t.Errorf("a bare boot signature identified as %+v", f)
	}
}

// TestIdentifyRealImages runs the host's mkfs tools where they exist.
func TestIdentifyRealImages(t *testing.T) {
	for _, tc := range []struct {
		want string
		cmd  []string
	}{
		{"ext2", []string{"mkfs.ext2", "-q", "-F"}},
		{"ext3", []string{"mkfs.ext3", "-q", "-F"}},
		{"ext4", []string{"mkfs.ext4", "-q", "-F"}},
		{"xfs", []string{"mkfs.xfs", "-q", "-f"}},
		{"vfat", []string{"mkfs.vfat"}},
		{"swap", []string{"mkswap"}},
		{"btrfs", []string{"mkfs.btrfs", "-q", "-f"}},
	} {
		if _, err := exec.LookPath(tc.cmd[0]); err != nil {
			continue
		}
		p := filepath.Join(t.TempDir(), "img")
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(p, 320<<20); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(tc.cmd[0], append(tc.cmd[1:], p)...).CombinedOutput(); err != nil {
			t.Errorf("%s: %v\n%s", tc.cmd[0], err, out)
			continue
		}
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := Identify(f, 320<<20)
		f.Close()
		if !ok || got.Type != tc.want {
			t.Errorf("image made by %s: %+v %v, want %s", tc.cmd[0], got, ok, tc.want)
		}
	}
}
