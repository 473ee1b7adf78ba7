package btrfs

import (
	"sort"

	"github.com/gobtrfs/btrfs/internal/ctree"
	"github.com/gobtrfs/btrfs/internal/disk"
)

// Info summarizes a filesystem: identity, geometry, features, devices and
// block groups with their use.
type Info struct {
	Label         string           `json:"label"`
	UUID          string           `json:"uuid"`
	Generation    uint64           `json:"generation"`
	NodeSize      uint32           `json:"nodesize"`
	SectorSize    uint32           `json:"sectorsize"`
	Checksum      string           `json:"csum_type"`
	Features      []string         `json:"features"`          // incompat feature names
	CompatRO      []string         `json:"compat_ro"`         // read-only compatible feature names
	TotalBytes    uint64           `json:"total_bytes"`       // superblock total_bytes
	BytesUsed     uint64           `json:"bytes_used"`        // superblock bytes_used
	NumDevices    uint64           `json:"num_devices"`       // superblock num_devices
	DefaultSubvol uint64           `json:"default_subvolume"` // the subvolume the kernel mounts by default
	Devices       []DeviceInfo     `json:"devices"`
	BlockGroups   []BlockGroupInfo `json:"block_groups"`
}

// DeviceInfo is one device as the chunk tree records it.
type DeviceInfo struct {
	ID         uint64 `json:"devid"`
	UUID       string `json:"uuid"`
	TotalBytes uint64 `json:"total_bytes"`
	BytesUsed  uint64 `json:"bytes_used"`
	Path       string `json:"path,omitempty"` // where it was opened from; empty if missing
	Missing    bool   `json:"missing"`
}

// BlockGroupInfo is one block group and its use.
type BlockGroupInfo struct {
	Start   uint64 `json:"start"`
	Length  uint64 `json:"length"`
	Used    uint64 `json:"used"`
	Flags   uint64 `json:"flags"`
	Type    string `json:"type"`    // DATA, METADATA, SYSTEM or DATA|METADATA
	Profile string `json:"profile"` // single, dup, raid1, ...
}

// Info reads the summary: devices from the chunk tree, block groups from
// the extent tree (or the block-group tree when the filesystem has one).
func (fsys *FS) Info() (*Info, error) {
	fsys, done := fsys.reader()
	defer done()
	sb := fsys.sb
	info := &Info{Label: sb.LabelString(), UUID: sb.FSID.String(), Generation: uint64(sb.Generation),
		NodeSize: sb.NodeSize, SectorSize: sb.SectorSize, Checksum: sb.CsumType.String(),
		TotalBytes: sb.TotalBytes, BytesUsed: sb.BytesUsed, NumDevices: sb.NumDevices}
	info.Features, _ = disk.IncompatFlagNames(sb.IncompatFlags)
	info.CompatRO, _ = disk.CompatROFlagNames(sb.CompatROFlags)
	var err error
	if info.DefaultSubvol, err = fsys.defaultSubvolume(); err != nil {
		return nil, err
	}
	if info.Devices, err = fsys.devices(); err != nil {
		return nil, err
	}
	if info.BlockGroups, err = fsys.blockGroups(); err != nil {
		return nil, err
	}
	return info, nil
}

func (fsys *FS) devices() ([]DeviceInfo, error) {
	var out []DeviceInfo
	err := ctree.Walk(fsys.blocks, fsys.chunkRoot(), func(n disk.Node, _ int) error {
		for i := 0; n.IsLeaf() && i < n.NumItems(); i++ {
			k := n.Key(i)
			if k.Type != disk.DevItemKey {
				continue
			}
			var d disk.DevItem
			if err := d.Decode(n.ItemData(i)); err != nil {
				return &disk.CorruptError{Logical: n.Bytenr(), Tree: disk.ChunkTreeObjectID, Key: &k, What: "dev item", Err: err}
			}
			path, ok := fsys.devPaths[d.DevID]
			out = append(out, DeviceInfo{ID: uint64(d.DevID), UUID: d.UUID.String(), TotalBytes: d.TotalBytes,
				BytesUsed: d.BytesUsed, Path: path, Missing: !ok})
		}
		return nil
	})
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, err
}

func (fsys *FS) blockGroups() ([]BlockGroupInfo, error) {
	treeID := disk.ExtentTreeObjectID
	if fsys.sb.CompatROFlags&disk.CompatROBlockGroupTree != 0 {
		treeID = disk.BlockGroupTreeObjectID
	}
	ri, err := fsys.rootItem(treeID)
	if err != nil {
		return nil, err
	}
	c := fsys.cursor(ctree.Root{Addr: ri.Bytenr, Level: int(ri.Level), Generation: ri.Generation, Owner: treeID})
	var out []BlockGroupInfo
	// Block group items sit among extent items; visit each by seeking past
	// the previous group instead of reading every extent item.
	ok, err := c.Seek(disk.Key{Type: disk.BlockGroupItemKey})
	for ok && err == nil {
		k := c.Key()
		if k.Type == disk.BlockGroupItemKey {
			var bg disk.BlockGroupItem
			if derr := bg.Decode(c.Data()); derr != nil {
				return nil, &disk.CorruptError{Logical: c.Leaf().Bytenr(), Tree: treeID, Key: &k, What: "block group item", Err: derr}
			}
			out = append(out, BlockGroupInfo{Start: uint64(k.ObjectID), Length: k.Offset, Used: bg.Used, Flags: bg.Flags,
				Type: disk.BlockGroupFlagsString(bg.Flags & disk.BlockGroupTypeMask), Profile: disk.ProfileName(bg.Flags)})
			next := uint64(k.ObjectID) + k.Offset
			if next <= uint64(k.ObjectID) {
				break
			}
			ok, err = c.Seek(disk.Key{ObjectID: disk.ObjectID(next), Type: disk.BlockGroupItemKey})
			continue
		}
		// Not a group item: jump to this objectid's group key, or the next objectid's.
		if k.ObjectID == ^disk.ObjectID(0) {
			break
		}
		if k.Type < disk.BlockGroupItemKey {
			ok, err = c.Seek(disk.Key{ObjectID: k.ObjectID, Type: disk.BlockGroupItemKey})
		} else {
			ok, err = c.Seek(disk.Key{ObjectID: k.ObjectID + 1, Type: disk.BlockGroupItemKey})
		}
	}
	return out, err
}
