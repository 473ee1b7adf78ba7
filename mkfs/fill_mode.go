package mkfs

import (
	"fmt"
	"strings"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/disk"
	"github.com/gobtrfs/btrfs/internal/modespec"
)

// mkdev encodes a device number for btrfs.FS.Mknod (btrfs.Mkdev).
func mkdev(major, minor uint32) uint64 { return btrfs.Mkdev(major, minor) }

// nodeTypes are the Linux file types of the kinds filler.mknod makes; the
// mode bits convert to the fs.FileMode Mknod takes with btrfs.FileModeOf.
var nodeTypes = map[Kind]uint32{
	KindFifo:     disk.ModeFIFO,
	KindSocket:   disk.ModeSocket,
	KindCharDev:  disk.ModeCharDev,
	KindBlockDev: disk.ModeBlockDev,
}

// chmodClause is one comma-separated part of a --chmod spec.
type chmodClause struct {
	only byte // 'D' (directories), 'F' (everything else) or 0
	mode modespec.Mode
}

// ParseChmod parses a mode override in the notation of rsync's --chmod:
// comma-separated clauses, each a chmod(1) mode ("644", "u+rwX", "g=u",
// "a=rX"; see internal/modespec, which the edit shell's chmod shares),
// optionally prefixed with D (applies to directories only) or F (to
// everything else). The clauses apply in order, each to the result of the
// one before. As with chmod(1), X sets execute for directories and for
// entries that already have an execute bit, and directories keep their
// set-id bits unless the clause names them; unlike chmod(1) no umask
// applies. The returned function maps an entry's mode bits (07777).
func ParseChmod(spec string) (func(k Kind, perm uint32) uint32, error) {
	var clauses []chmodClause
	for _, raw := range strings.Split(spec, ",") {
		var c chmodClause
		s := raw
		if s != "" && (s[0] == 'D' || s[0] == 'F') {
			c.only, s = s[0], s[1:]
		}
		m, err := modespec.Parse(s)
		if err != nil {
			return nil, fmt.Errorf("mkfs: bad chmod clause %q: %w", raw, err)
		}
		c.mode = m
		clauses = append(clauses, c)
	}
	return func(k Kind, perm uint32) uint32 {
		isDir := k == KindDir
		for _, c := range clauses {
			if c.only == 'D' && !isDir || c.only == 'F' && isDir {
				continue
			}
			perm = c.mode.Apply(perm, isDir)
		}
		return perm
	}, nil
}

// parseChmodOption parses BuildOptions.Chmod; "" is no override.
func parseChmodOption(spec string) (func(Kind, uint32) uint32, error) {
	if spec == "" {
		return nil, nil
	}
	return ParseChmod(spec)
}
