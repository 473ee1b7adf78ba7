package cli

import (
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
	"github.com/gobtrfs/btrfs/mkfs"
)

// TestArgsAsMkfsBtrfs: started as mkfs.btrfs (any directory, a Windows
// .exe), gobtrfs runs its mkfs command; under its own name, itself.
func TestArgsAsMkfsBtrfs(t *testing.T) {
	for _, tc := range []struct {
		argv, want []string
	}{
		{[]string{"/usr/local/bin/mkfs.btrfs", "-L", "x", "img"}, []string{"mkfs", "-L", "x", "img"}},
		{[]string{"mkfs.btrfs.exe", "-V"}, []string{"mkfs", "-V"}},
		{[]string{"/bin/gobtrfs", "ls", "img"}, []string{"ls", "img"}},
		{[]string{"mkfs.ext4", "img"}, []string{"img"}},
	} {
		if got := Args(tc.argv); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Args(%q) = %q, want %q", tc.argv, got, tc.want)
		}
	}
}

// TestMkfsProgsSyntax reads mkfs.btrfs 6.19's --subvol and --inode-flags
// arguments as it does.
func TestMkfsProgsSyntax(t *testing.T) {
	for arg, want := range map[string]mkfs.Subvolume{
		"home": {Path: "home"}, "rw:home": {Path: "home"}, "ro:usr": {Path: "usr", ReadOnly: true},
		"default:@": {Path: "@", Default: true}, "default-ro:@": {Path: "@", Default: true, ReadOnly: true},
		"a:b": {Path: "a:b"}, "ro:x:y": {Path: "x:y", ReadOnly: true},
	} {
		if got := parseSubvolArg(arg); got != want {
			t.Errorf("--subvol %q: %+v, want %+v", arg, got, want)
		}
	}
	for arg, want := range map[string]mkfs.InodeFlags{
		"nodatacow:var/lib":     {Path: "var/lib", NoDataCow: true},
		"nodatasum,nodatacow:x": {Path: "x", NoDataCow: true, NoDataSum: true},
	} {
		if got, err := parseInodeFlagsArg(arg); err != nil || got != want {
			t.Errorf("--inode-flags %q: %+v %v, want %+v", arg, got, err, want)
		}
	}
}

// TestMkfsInfoFlags: -V and -O list-all print and need no device.
func TestMkfsInfoFlags(t *testing.T) {
	out, _, code := run(t, "mkfs", "-V")
	if code != ExitOK || !strings.HasPrefix(out, "mkfs.btrfs, part of gobtrfs") || !strings.Contains(out, "btrfs-progs v"+ProgsVersion) {
		t.Errorf("-V: exit %d, %q", code, out)
	}
	_, stderr, code := run(t, "mkfs", "-O", "list-all")
	if code != ExitOK || !strings.Contains(stderr, "free-space-tree") {
		t.Errorf("-O list-all: exit %d, %q", code, stderr)
	}
}

// TestMkfsRefusesOtherFilesystems: a target holding another filesystem,
// swap, a LUKS header or a partition table is refused without -f, naming
// what it holds, and left untouched; -f overwrites it. The host's mkfs
// tools make the real ones where they exist, the others get their magic
// numbers where blkid looks for them.
func TestMkfsRefusesOtherFilesystems(t *testing.T) {
	mbrEntry := "\x00\x00\x02\x00\x83"
	le16 := func(v uint16) string { return string(binary.LittleEndian.AppendUint16(nil, v)) }
	for _, tc := range []struct {
		name  string
		cmd   []string         // a host tool making it, or nil
		parts map[int64]string // else these bytes
		want  string
	}{
		{"btrfs", nil, nil, "btrfs filesystem"},
		{"ext2", []string{"mkfs.ext2", "-q", "-F"}, map[int64]string{1024 + 0x38: le16(0xEF53)}, "ext2 filesystem"},
		{"ext4", []string{"mkfs.ext4", "-q", "-F"}, map[int64]string{1024 + 0x38: le16(0xEF53), 1024 + 0x60: "\xc2\x02\x00\x00"}, "ext4 filesystem"},
		{"xfs", nil, map[int64]string{0: "XFSB"}, "an xfs filesystem"},
		{"vfat", nil, map[int64]string{82: "FAT32   ", 510: "\x55\xaa"}, "vfat"},
		{"swap", []string{"mkswap"}, map[int64]string{4086: "SWAPSPACE2"}, "swap"},
		{"luks", nil, map[int64]string{0: "LUKS\xba\xbe\x00\x02"}, "LUKS"},
		{"mbr", nil, map[int64]string{446: mbrEntry, 510: "\x55\xaa"}, "MBR partition table"},
		{"gpt", nil, map[int64]string{446: "\x00\x00\x02\x00\xee", 510: "\x55\xaa", 512: "EFI PART"}, "GPT partition table"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			img := filepath.Join(t.TempDir(), "img")
			if err := os.WriteFile(img, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(img, 256<<20); err != nil {
				t.Fatal(err)
			}
			switch _, lookErr := exec.LookPath(firstOr(tc.cmd)); {
			case tc.name == "btrfs":
				if _, stderr, code := run(t, "mkfs", "-q", img); code != ExitOK {
					t.Fatalf("first mkfs: %s", stderr)
				}
			case tc.cmd != nil && lookErr == nil:
				if out, err := exec.Command(tc.cmd[0], append(tc.cmd[1:], img)...).CombinedOutput(); err != nil {
					t.Fatalf("%s: %v\n%s", tc.cmd[0], err, out)
				}
			default:
				f, err := os.OpenFile(img, os.O_WRONLY, 0)
				if err != nil {
					t.Fatal(err)
				}
				for off, s := range tc.parts {
					f.WriteAt([]byte(s), off)
				}
				f.Close()
			}
			before, _ := os.ReadFile(img)
			_, stderr, code := run(t, "mkfs", "-q", img)
			if code != ExitFailure || !strings.Contains(stderr, tc.want) || !strings.Contains(stderr, "-f") {
				t.Errorf("without -f: exit %d, %q; want %d naming %q and -f", code, stderr, ExitFailure, tc.want)
			}
			if after, _ := os.ReadFile(img); string(after) != string(before) {
				t.Errorf("a refused mkfs changed the target")
			}
			if _, stderr, code := run(t, "mkfs", "-q", "-f", img); code != ExitOK {
				t.Errorf("with -f: exit %d, %s", code, stderr)
			}
			fsys, err := btrfs.Open(img, nil)
			if err != nil {
				t.Fatalf("after -f: %v", err)
			}
			fsys.Close()
		})
	}
}

func firstOr(cmd []string) string {
	if len(cmd) == 0 {
		return "-"
	}
	return cmd[0]
}

// TestMkfsRefusesMountedTarget: an image the kernel has mounted is
// refused, with -f too, and stays mountable and unchanged.
func TestMkfsRefusesMountedTarget(t *testing.T) {
	btrfstest.RequireInterop(t)
	img := filepath.Join(t.TempDir(), "img")
	if _, stderr, code := run(t, "mkfs", "-q", "-b", "256M", img); code != ExitOK {
		t.Fatal(stderr)
	}
	mnt := btrfstest.Mount(t, "", img)
	if err := os.WriteFile(filepath.Join(mnt, "keep"), []byte("kept"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"mkfs", "-q", img}, {"mkfs", "-q", "-f", img}, {"mkfs", "-q", "-f", "-r", t.TempDir(), img}} {
		_, stderr, code := run(t, args...)
		if code != ExitFailure || !strings.Contains(stderr, "mounted") {
			t.Errorf("%q: exit %d, %q; want refused as mounted", args, code, stderr)
		}
	}
	if b, err := os.ReadFile(filepath.Join(mnt, "keep")); err != nil || string(b) != "kept" {
		t.Errorf("mounted filesystem after the refusals: %q, %v", b, err)
	}
	btrfstest.Unmount(t, mnt)
	btrfstest.Check(t, []string{img}, true)
}

// TestMkfsRefusesImageInRootdir: an image inside the directory it is
// made from would copy itself (mkfs.btrfs refuses the same).
func TestMkfsRefusesImageInRootdir(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "file"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	for _, args := range [][]string{
		{"mkfs", "-q", "--rootdir", ".", "img"},
		{"mkfs", "-q", "-b", "256M", "--rootdir", dir, filepath.Join(dir, "sub", "..", "img2")},
	} {
		_, stderr, code := run(t, args...)
		if code != ExitUsage || !strings.Contains(stderr, "inside") {
			t.Errorf("%q: exit %d, %q; want a usage error saying the image is inside the input", args, code, stderr)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "img")); !os.IsNotExist(err) {
		t.Errorf("refused image was created (%v)", err)
	}
	// A sibling directory whose name starts the same is not inside.
	other := dir + "-other"
	os.Mkdir(other, 0o755)
	t.Cleanup(func() { os.RemoveAll(other) })
	if _, stderr, code := run(t, "mkfs", "-q", "--rootdir", dir, filepath.Join(other, "img")); code != ExitOK {
		t.Errorf("image beside the input: %s", stderr)
	}
}
