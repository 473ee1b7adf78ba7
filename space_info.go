package btrfs

import "github.com/gobtrfs/btrfs/internal/disk"

// SpaceInfo is one line of `btrfs filesystem df`: the block groups of one
// type and profile, or the global reserve.
type SpaceInfo struct {
	// Type is "Data", "System", "Metadata", "Data+Metadata" (mixed
	// groups) or "GlobalReserve".
	Type string `json:"type"`
	// Profile is "single", "DUP", "RAID0", "RAID1", "RAID10", "RAID5",
	// "RAID6", "RAID1C3" or "RAID1C4", as progs prints it.
	Profile string `json:"profile"`
	// Total is the bytes of the groups (logical, one copy), Used the
	// bytes used in them.
	Total uint64 `json:"total"`
	Used  uint64 `json:"used"`
}

// spaceTypes are the block group types in the kernel's SPACE_INFO order,
// and the profiles in its RAID-index order (btrfs_raid_array).
var (
	spaceTypes = []struct {
		flags uint64
		name  string
	}{
		{disk.BlockGroupData, "Data"}, {disk.BlockGroupSystem, "System"},
		{disk.BlockGroupMetadata, "Metadata"}, {disk.BlockGroupData | disk.BlockGroupMetadata, "Data+Metadata"},
	}
	spaceProfiles = []struct {
		flags uint64
		name  string
	}{
		{disk.BlockGroupRAID10, "RAID10"}, {disk.BlockGroupRAID1, "RAID1"}, {disk.BlockGroupDUP, "DUP"},
		{disk.BlockGroupRAID0, "RAID0"}, {0, "single"}, {disk.BlockGroupRAID5, "RAID5"},
		{disk.BlockGroupRAID6, "RAID6"}, {disk.BlockGroupRAID1C3, "RAID1C3"}, {disk.BlockGroupRAID1C4, "RAID1C4"},
	}
)

// Space sums the block groups by type and profile, in the order the
// kernel's BTRFS_IOC_SPACE_INFO reports them, and ends with the global
// reserve the kernel would size at mount (its formula of Linux 6.x: the
// metadata that the extent, checksum and free-space trees use, but at
// least 16 node-size paths for each of 7 items, one per such tree, and
// the delayed references of an unlink, doubled with a free-space tree;
// at most 512 MiB). Nothing in the reserve is in use offline.
func (fsys *FS) Space() ([]SpaceInfo, error) {
	info, err := fsys.Info()
	if err != nil {
		return nil, err
	}
	var out []SpaceInfo
	for _, t := range spaceTypes {
		for _, p := range spaceProfiles {
			s := SpaceInfo{Type: t.name, Profile: p.name}
			found := false
			for _, g := range info.BlockGroups {
				if g.Flags&disk.BlockGroupTypeMask != t.flags || g.Flags&disk.BlockGroupProfileMask != p.flags {
					continue
				}
				found = true
				s.Total += g.Length
				s.Used += g.Used
			}
			if found {
				out = append(out, s)
			}
		}
	}
	reserve, err := fsys.globalReserve()
	if err != nil {
		return nil, err
	}
	return append(out, SpaceInfo{Type: "GlobalReserve", Profile: "single", Total: reserve}), nil
}

// globalReserve is the size of the kernel's global block reserve.
func (fsys *FS) globalReserve() (uint64, error) {
	fsys, done := fsys.reader()
	defer done()
	fst := fsys.sb.CompatROFlags&disk.CompatROFreeSpaceTree != 0
	var used, roots uint64
	for _, id := range []disk.ObjectID{disk.ExtentTreeObjectID, disk.CsumTreeObjectID, disk.FreeSpaceTreeObjectID, disk.BlockGroupTreeObjectID} {
		switch {
		case id == disk.FreeSpaceTreeObjectID && !fst,
			id == disk.BlockGroupTreeObjectID && fsys.sb.CompatROFlags&disk.CompatROBlockGroupTree == 0:
			continue
		}
		ri, err := fsys.rootItem(id)
		if err != nil {
			return 0, err
		}
		used += ri.BytesUsed
		roots++
	}
	unlink := uint64(6)
	if fst {
		unlink *= 2
	}
	floor := uint64(fsys.sb.NodeSize) * 16 * (7 + roots + unlink)
	return min(max(used, floor), 512<<20), nil
}
