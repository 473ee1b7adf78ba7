package btrfs_test

import (
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// acl builds a POSIX ACL xattr value from (tag, perm, id) triples.
func acl(entries ...[3]uint32) []byte {
	b := binary.LittleEndian.AppendUint32(nil, 2)
	for _, e := range entries {
		b = binary.LittleEndian.AppendUint16(b, uint16(e[0]))
		b = binary.LittleEndian.AppendUint16(b, uint16(e[1]))
		b = binary.LittleEndian.AppendUint32(b, e[2])
	}
	return b
}

// TestSetxattrACL stores POSIX ACLs the kernel made on a host file in our
// image, and checks that the kernel's mount gives the same ACLs back and
// that malformed ones are refused as the kernel refuses them.
func TestSetxattrACL(t *testing.T) {
	btrfstest.RequireInterop(t)
	if _, err := exec.LookPath("setfacl"); err != nil {
		t.Skip("setfacl not installed")
	}
	// ACLs made by the kernel on a btrfs of its own.
	src := btrfstest.Mount(t, "", btrfstest.Mkfs(t, btrfstest.MkfsOptions{}))
	hostDir := filepath.Join(src, "d")
	hostFile := filepath.Join(src, "f")
	if err := os.Mkdir(hostDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(hostFile, nil, 0o640); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"-m", "u:1000:rw,g:2000:r,m::rw", hostFile}, {"-d", "-m", "u:1001:rx", hostDir}, {"-m", "u:7:r", hostDir}} {
		if out, err := exec.Command("setfacl", args...).CombinedOutput(); err != nil {
			t.Fatalf("setfacl %v: %v\n%s", args, err, out)
		}
	}
	raw := func(path, name string) []byte {
		buf := make([]byte, 4096)
		n, err := unix.Lgetxattr(path, name, buf)
		if err != nil {
			t.Fatalf("getxattr %s %s: %v", path, name, err)
		}
		return buf[:n]
	}
	fileACL := raw(hostFile, "system.posix_acl_access")
	dirACL := raw(hostDir, "system.posix_acl_access")
	dirDefault := raw(hostDir, "system.posix_acl_default")

	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{})
	fsys, err := btrfs.OpenWritable(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	for _, step := range []error{
		fsys.Mkdir("d", 0o755),
		fsys.CreateEmpty("f", 0o660), // the mode matches the ACL's mask, as setfacl left it
		fsys.Setxattr("f", "system.posix_acl_access", fileACL),
		fsys.Setxattr("d", "system.posix_acl_access", dirACL),
		fsys.Setxattr("d", "system.posix_acl_default", dirDefault),
	} {
		if step != nil {
			t.Fatal(step)
		}
	}
	bad := map[string][]byte{
		"empty":         acl(),
		"version":       append([]byte{3, 0, 0, 0}, acl([3]uint32{1, 7, 0}, [3]uint32{4, 5, 0}, [3]uint32{0x20, 5, 0})[4:]...),
		"no other":      acl([3]uint32{1, 7, 0}, [3]uint32{4, 5, 0}),
		"no mask":       acl([3]uint32{1, 7, 0}, [3]uint32{2, 7, 5}, [3]uint32{4, 5, 0}, [3]uint32{0x20, 5, 0}),
		"order":         acl([3]uint32{4, 5, 0}, [3]uint32{1, 7, 0}, [3]uint32{0x20, 5, 0}),
		"duplicate uid": acl([3]uint32{1, 7, 0}, [3]uint32{2, 7, 5}, [3]uint32{2, 7, 5}, [3]uint32{4, 5, 0}, [3]uint32{0x10, 7, 0}, [3]uint32{0x20, 5, 0}),
		"perm bits":     acl([3]uint32{1, 8, 0}, [3]uint32{4, 5, 0}, [3]uint32{0x20, 5, 0}),
		"torn":          fileACL[:len(fileACL)-3],
	}
	for what, v := range bad {
		if err := fsys.Setxattr("f", "system.posix_acl_access", v); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("%s: %v, want EINVAL", what, err)
		}
	}
	if err := fsys.Setxattr("f", "system.posix_acl_default", dirDefault); !errors.Is(err, syscall.EACCES) {
		t.Errorf("default ACL on a file: %v, want EACCES", err)
	}
	if err := fsys.Setxattr("f", "system.other", []byte("x")); !errors.Is(err, syscall.EOPNOTSUPP) {
		t.Errorf("system.other: %v, want EOPNOTSUPP", err)
	}
	if err := fsys.Commit(); err != nil {
		t.Fatal(err)
	}
	fsys.Close()
	btrfstest.Check(t, []string{img}, false)
	dir := btrfstest.Mount(t, "ro", img)
	for _, c := range [][2]string{{hostFile, "f"}, {hostDir, "d"}} {
		want, err := exec.Command("getfacl", "-cn", c[0]).CombinedOutput()
		if err != nil {
			t.Fatalf("getfacl %s: %v\n%s", c[0], err, want)
		}
		got, err := exec.Command("getfacl", "-cn", filepath.Join(dir, c[1])).CombinedOutput()
		if err != nil || string(got) != string(want) {
			t.Errorf("getfacl %s: %v\n got:\n%s\nwant:\n%s", c[1], err, got, want)
		}
	}
}
