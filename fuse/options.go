package fuse

import (
	"fmt"
	"log"
	"strconv"
	"strings"
	"time"

	"github.com/gobtrfs/btrfs"
)

// Options tune Mount. The zero value shows the default subvolume,
// read-write when the FS is writable, to the mounting user only.
type Options struct {
	// ReadOnly refuses every change with EROFS, also on a writable FS.
	// A read-only FS (btrfs.Open) is always shown read-only.
	ReadOnly bool
	// Subvol is the path (from the top level) of the subvolume or
	// directory shown at the mount point, as subvol= of btrfs(5).
	Subvol string
	// SubvolID is the id of the subvolume shown at the mount point, as
	// subvolid=; 0 means the default subvolume (the one set-default
	// chose, 5 unless changed). Subvol wins when both are set.
	SubvolID uint64
	// AllowOther lets other users than the mounting one in (FUSE's
	// allow_other; non-root users need user_allow_other in
	// /etc/fuse.conf).
	AllowOther bool
	// DefaultPermissions has the kernel check modes, owners and POSIX
	// ACLs before calling the filesystem, as it does for its own btrfs
	// (FUSE's default_permissions). The kernel checks so also with
	// AllowOther and when the mounting user is not root (the mount then
	// asks for the kernel's ACL support, which turns the checks on); a
	// mount by root for root alone has none, as root passes them.
	DefaultPermissions bool
	// EntryTimeout and AttrTimeout are how long the kernel may keep a
	// name's lookup and a file's attributes without asking again; 0
	// means DefaultTimeout, negative means not at all.
	EntryTimeout, AttrTimeout time.Duration
	// FsName is the source shown in /proc/mounts; "" means "gobtrfs".
	FsName string
	// NoDataSum and NoDataCow give regular files made through the mount
	// the NODATASUM or NODATACOW (which brings NODATASUM) inode flag, as
	// the nodatasum and nodatacow mount options do for the kernel.
	NoDataSum, NoDataCow bool
	// Stats adds the hidden control directory .gobtrfs at the top of
	// the mount, whose file "counters" reads as the live filesystem's
	// write counters in JSON (control_linux.go).
	Stats bool
	// NoGather makes every write(2) its own File.WriteAt, as it comes,
	// instead of gathering an inode's small writes into one change
	// (docs/design/0011-fuse-mount.md, "Caching").
	NoGather bool
	// GatherDelay is how long after the first of them gathered writes
	// go into the filesystem when nothing put them in before; 0 means
	// DefaultGatherDelay.
	GatherDelay time.Duration
	// Debug logs every FUSE request and reply.
	Debug bool
	// Logger receives go-fuse's diagnostics and Debug's log; nil means
	// none.
	Logger *log.Logger
}

// DefaultGatherDelay is the GatherDelay Mount uses unless told otherwise:
// short, so gathered data waits for a background commit no longer than
// written data does without gathering, to within this.
const DefaultGatherDelay = 100 * time.Millisecond

// DefaultTimeout is the entry and attribute timeout Mount uses unless told
// otherwise (docs/design/0011-fuse-mount.md says why this value).
const DefaultTimeout = 10 * time.Second

func (o *Options) timeouts() (entry, attr time.Duration) {
	pick := func(d time.Duration) time.Duration {
		switch {
		case d == 0:
			return DefaultTimeout
		case d < 0:
			return 0
		}
		return d
	}
	return pick(o.EntryTimeout), pick(o.AttrTimeout)
}

// ParseOptions reads a mount(8)-style option string (comma separated, as
// -o takes it) into the btrfs.Options the image is opened with and the
// Options it is mounted with. The names are btrfs(5)'s where they apply:
// ro, rw, subvol=PATH, subvolid=N, compress=ALGO[:LEVEL], compress-force=,
// commit=SECONDS, nodatasum, nodatacow, noatime, relatime, strictatime,
// plus FUSE's allow_other and default_permissions. btrfs options that
// change nothing here (space_cache, ssd, discard, ...) are accepted and
// ignored, as a kernel would for ones it no longer needs; unknown names are
// an error.
func ParseOptions(s string) (*btrfs.Options, *Options, error) {
	bo := &btrfs.Options{}
	mo := &Options{}
	for _, o := range strings.Split(s, ",") {
		key, val, hasVal := strings.Cut(strings.TrimSpace(o), "=")
		switch key {
		case "":
		case "ro":
			mo.ReadOnly = true
		case "rw":
			mo.ReadOnly = false
		case "subvol":
			mo.Subvol = val
		case "subvolid":
			n, err := strconv.ParseUint(val, 0, 64)
			if err != nil {
				return nil, nil, fmt.Errorf("option subvolid=%s: not a number", val)
			}
			mo.SubvolID = n
		case "compress", "compress-force":
			algo, level, _ := strings.Cut(val, ":")
			switch algo {
			case "", "zlib", "lzo", "zstd":
			case "no", "none":
				algo = ""
			default:
				return nil, nil, fmt.Errorf("option %s=%s: unknown algorithm (zlib, lzo, zstd or no)", key, val)
			}
			if !hasVal {
				algo = "zlib" // the kernel's default for a bare compress
			}
			bo.Compress = algo
			bo.CompressForce = key == "compress-force"
			if level != "" {
				n, err := strconv.Atoi(level)
				if err != nil {
					return nil, nil, fmt.Errorf("option %s=%s: bad level", key, val)
				}
				bo.CompressLevel = n
			}
		case "commit":
			n, err := strconv.Atoi(val)
			if err != nil || n < 0 {
				return nil, nil, fmt.Errorf("option commit=%s: not a number of seconds", val)
			}
			if n > 0 { // 0 is the kernel's way of saying the default
				bo.CommitInterval = time.Duration(n) * time.Second
			}
		case "nodatasum":
			mo.NoDataSum = true
		case "nodatacow":
			mo.NoDataCow, mo.NoDataSum = true, true
		case "datasum", "datacow":
		case "notreelog":
			bo.NoTreeLog = true
		case "treelog":
			bo.NoTreeLog = false
		case "noatime", "relatime", "strictatime", "atime", "nodiratime", "lazytime",
			"nosuid", "nodev", "noexec", "suid", "dev", "exec", "sync", "async":
			// gobtrfs never updates access times, which is noatime;
			// the kernel enforces the others on the mount itself.
		case "space_cache", "nospace_cache", "ssd", "nossd", "ssd_spread", "discard",
			"nodiscard", "autodefrag", "noautodefrag", "degraded", "barrier", "nobarrier",
			"flushoncommit", "noflushoncommit", "thread_pool", "max_inline", "user_subvol_rm_allowed",
			"skip_balance", "norecovery", "rescue", "noacl", "acl":
			if key == "max_inline" {
				n, err := strconv.Atoi(val)
				if err != nil {
					return nil, nil, fmt.Errorf("option max_inline=%s: not a number", val)
				}
				if n == 0 {
					n = -1
				}
				bo.MaxInline = n
			}
		case "allow_other":
			mo.AllowOther = true
		case "default_permissions":
			mo.DefaultPermissions = true
		case "debug":
			mo.Debug = true
		case "fsname":
			mo.FsName = val
		default:
			return nil, nil, fmt.Errorf("unknown mount option %q", o)
		}
	}
	return bo, mo, nil
}
