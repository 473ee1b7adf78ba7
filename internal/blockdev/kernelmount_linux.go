//go:build linux

package blockdev

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// kernelMount reports whether the kernel has mounted the filesystem in the
// opened image file or block device st, as a BusyError (ErrMounted, Path
// left for the caller), or nil. An image file counts as mounted when a
// loop device attached to it is mounted; a loop device attached but not
// mounted does not. What cannot be read (no /sys, no /proc) counts as not
// mounted: this check guards against a mistake and must not stop writes
// where the system does not tell.
func kernelMount(st fs.FileInfo) *BusyError {
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	mnt := readMountinfo()
	if st.Mode()&fs.ModeDevice != 0 && st.Mode()&fs.ModeCharDevice == 0 {
		return mountedDevice(uint64(sys.Rdev), "", mnt)
	}
	if !st.Mode().IsRegular() {
		return nil
	}
	for _, loop := range loopsOf(uint64(sys.Dev), sys.Ino) {
		if m := mountedDevice(loop.rdev, loop.path, mnt); m != nil {
			return m
		}
	}
	return nil
}

// mountedDevice reports whether the block device rdev is mounted: it is
// the source of a mount (any filesystem type), or one of the devices of a
// mounted btrfs (whose mount shows only one device as its source, and
// whose mountinfo device number is an anonymous one). through names the
// device for the message ("" for the block device the caller opened).
func mountedDevice(rdev uint64, through string, mnt []mountLine) *BusyError {
	for _, m := range mnt {
		if m.dev == rdev || m.sourceRdev() == rdev {
			return &BusyError{Kind: ErrMounted, MountPoint: m.point, Through: through}
		}
	}
	// A device of a multi-device btrfs: the kernel lists the devices of
	// every mounted btrfs under /sys/fs/btrfs/FSID/devices, by their
	// kernel names, whatever this process's mount namespace shows.
	name := kernelName(rdev)
	if name == "" {
		return nil
	}
	fsDirs, _ := filepath.Glob(filepath.Join("/sys/fs/btrfs/*/devices", name))
	if len(fsDirs) == 0 {
		return nil
	}
	members := map[uint64]bool{}
	devs, _ := os.ReadDir(filepath.Dir(fsDirs[0]))
	for _, d := range devs {
		if n, ok := readDevNumber(filepath.Join(filepath.Dir(fsDirs[0]), d.Name(), "dev")); ok {
			members[n] = true
		}
	}
	m := &BusyError{Kind: ErrMounted, Through: through}
	for _, l := range mnt {
		if l.fstype == "btrfs" && members[l.sourceRdev()] {
			m.MountPoint = l.point
			if through == "" {
				m.Through = l.source
			}
			break
		}
	}
	if m.Through == "" && m.MountPoint == "" {
		m.Through = "/dev/" + name
	}
	return m
}

// loopDevice is a loop device attached to the image file being opened.
type loopDevice struct {
	path string // /dev/loopN
	rdev uint64
}

// loopsOf finds the loop devices whose backing file is the file (dev,
// ino). The kernel lists every attached loop device's backing file path in
// sysfs; the path is compared by stat, so hard links and other names of
// the file count. Where that path no longer leads to the file (renamed,
// deleted, or outside this mount namespace), the loop device itself is
// asked (LOOP_GET_STATUS64 gives the backing file's device and inode),
// which needs permission to open it.
func loopsOf(dev, ino uint64) []loopDevice {
	dirs, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	var out []loopDevice
	for _, bf := range dirs {
		sysDir := filepath.Dir(filepath.Dir(bf))
		rdev, ok := readDevNumber(filepath.Join(sysDir, "dev"))
		if !ok {
			continue
		}
		l := loopDevice{path: "/dev/" + filepath.Base(sysDir), rdev: rdev}
		b, err := os.ReadFile(bf)
		if err != nil {
			continue
		}
		name := strings.TrimSuffix(string(b), "\n")
		var st unix.Stat_t
		if !strings.HasSuffix(name, " (deleted)") && unix.Stat(name, &st) == nil {
			if uint64(st.Dev) == dev && st.Ino == ino {
				out = append(out, l)
			}
			continue
		}
		if f, err := os.Open(l.path); err == nil {
			info, err := unix.IoctlLoopGetStatus64(int(f.Fd()))
			f.Close()
			if err == nil && info.Device == dev && info.Inode == ino {
				out = append(out, l)
			}
		}
	}
	return out
}

// mountLine is one line of /proc/self/mountinfo.
type mountLine struct {
	dev    uint64 // the mount's device number (anonymous for btrfs)
	point  string
	fstype string
	source string
}

// sourceRdev is the device number of the mount's source when the source
// is a block device, else 0 (no block device has number 0:0). Only
// sources under /dev are looked at: a stat elsewhere could hang on a
// network filesystem.
func (m mountLine) sourceRdev() uint64 {
	if !strings.HasPrefix(m.source, "/dev/") {
		return 0
	}
	var st unix.Stat_t
	if unix.Stat(m.source, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFBLK {
		return 0
	}
	return uint64(st.Rdev)
}

// readMountinfo reads this process's mount table; nil when it cannot.
func readMountinfo() []mountLine {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []mountLine
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if m, ok := parseMountinfo(sc.Text()); ok {
			out = append(out, m)
		}
	}
	return out
}

// parseMountinfo parses one mountinfo line (proc(5)): ID, parent ID,
// major:minor, root, mount point, options, optional fields up to "-", then
// the type, the source and the superblock options.
func parseMountinfo(line string) (mountLine, bool) {
	f := strings.Fields(line)
	sep := -1
	for i := 6; i < len(f); i++ {
		if f[i] == "-" {
			sep = i
			break
		}
	}
	if len(f) < 5 || sep < 0 || sep+2 >= len(f) {
		return mountLine{}, false
	}
	dev, ok := parseDevNumber(f[2])
	if !ok {
		return mountLine{}, false
	}
	return mountLine{dev: dev, point: unescapeMountinfo(f[4]), fstype: f[sep+1], source: unescapeMountinfo(f[sep+2])}, true
}

// unescapeMountinfo undoes the kernel's octal escapes (\040 for a space,
// \011, \012, \134) in a mountinfo path.
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// kernelName is the kernel's name of block device rdev (loop3, sda1,
// dm-0), from the /sys/dev/block link; "" when unknown.
func kernelName(rdev uint64) string {
	target, err := os.Readlink(fmt.Sprintf("/sys/dev/block/%d:%d", unix.Major(rdev), unix.Minor(rdev)))
	if err != nil {
		return ""
	}
	return filepath.Base(target)
}

// readDevNumber reads a sysfs "major:minor" file.
func readDevNumber(path string) (uint64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	return parseDevNumber(strings.TrimSpace(string(b)))
}

// parseDevNumber parses "major:minor" into a device number as stat gives it.
func parseDevNumber(s string) (uint64, bool) {
	maj, min, ok := strings.Cut(s, ":")
	if !ok {
		return 0, false
	}
	a, err1 := strconv.ParseUint(maj, 10, 32)
	b, err2 := strconv.ParseUint(min, 10, 32)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return unix.Mkdev(uint32(a), uint32(b)), true
}

// busyBlockDevice explains EBUSY from the exclusive open of block device
// path for writing: the kernel has a filesystem on it mounted, or some
// other exclusive opener (another writer, a device mapper, md) holds it.
func busyBlockDevice(path string, err error) error {
	if !errors.Is(err, unix.EBUSY) {
		return err
	}
	var st unix.Stat_t
	if unix.Stat(path, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFBLK {
		if m := mountedDevice(uint64(st.Rdev), "", readMountinfo()); m != nil {
			m.Path, m.Cause = path, unix.EBUSY
			return m
		}
	}
	return &BusyError{Path: path, Kind: ErrLocked, Cause: unix.EBUSY}
}
