package disk

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Reading `btrfs inspect-internal dump-tree` output, and printing decoded
// items in the same words, so tests can compare the two.

// dumpItem is one item as dump-tree printed it.
type dumpItem struct {
	key           string
	itemoff, size int
	lines         []string // body lines, leading tabs removed
}

var (
	dumpLeafRE = regexp.MustCompile(`^leaf (\d+) items (\d+) `)
	dumpItemRE = regexp.MustCompile(`^\titem (\d+) key \((.*)\) itemoff (\d+) itemsize (\d+)$`)
)

// parseDumpTree returns the items of every leaf in dump-tree output, by
// leaf address.
func parseDumpTree(text string) map[LogicalAddr][]dumpItem {
	out := map[LogicalAddr][]dumpItem{}
	var cur LogicalAddr
	inLeaf := false
	for _, line := range strings.Split(text, "\n") {
		if m := dumpLeafRE.FindStringSubmatch(line); m != nil {
			addr, _ := strconv.ParseUint(m[1], 10, 64)
			cur, inLeaf = LogicalAddr(addr), true
			out[cur] = []dumpItem{}
			continue
		}
		if !strings.HasPrefix(line, "\t") {
			if !strings.HasPrefix(line, "leaf ") && !strings.HasPrefix(line, "fs uuid") && !strings.HasPrefix(line, "chunk uuid") {
				inLeaf = false
			}
			continue
		}
		if !inLeaf {
			continue
		}
		if m := dumpItemRE.FindStringSubmatch(line); m != nil {
			off, _ := strconv.Atoi(m[3])
			size, _ := strconv.Atoi(m[4])
			out[cur] = append(out[cur], dumpItem{key: m[2], itemoff: off, size: size})
			continue
		}
		if items := out[cur]; len(items) > 0 {
			items[len(items)-1].lines = append(items[len(items)-1].lines, strings.TrimLeft(line, "\t"))
		}
	}
	return out
}

// missingLines returns the expected lines not found in the item's body.
// An expected line ending in "*" only has to start a body line.
func (d *dumpItem) missingLines(want []string) []string {
	var missing []string
	for _, w := range want {
		found := false
		for _, l := range d.lines {
			if p, ok := strings.CutSuffix(w, "*"); ok && strings.HasPrefix(l, p) || l == w {
				found = true
				break
			}
		}
		if !found {
			missing = append(missing, w)
		}
	}
	return missing
}

// progsObjectID prints an objectid the way btrfs-progs does in keys.
func progsObjectID(id ObjectID, t KeyType) string {
	switch {
	case t == DevExtentKey || t == QgroupStatusKey || t == QgroupInfoKey || t == QgroupLimitKey:
		return strconv.FormatUint(uint64(id), 10)
	case t == QgroupRelationKey:
		return QgroupID(id).String()
	case t == UUIDKeySubvol || t == UUIDKeyReceivedSubvol:
		return fmt.Sprintf("0x%016x", uint64(id))
	case id == DevStatsObjectID && t == PersistentItemKey:
		return "DEV_STATS"
	case id == DevItemsObjectID && t == DevItemKey:
		return "DEV_ITEMS"
	case id == FirstChunkTreeObjectID && t == ChunkItemKey:
		return "FIRST_CHUNK_TREE"
	case id == ^ObjectID(0):
		return "-1"
	}
	return id.TreeName()
}

// progsKey prints a key the way btrfs-progs does, without parentheses.
func progsKey(k Key) string {
	off := strconv.FormatUint(k.Offset, 10)
	switch k.Type {
	case QgroupInfoKey, QgroupLimitKey, QgroupRelationKey:
		off = QgroupID(k.Offset).String()
	case UUIDKeySubvol, UUIDKeyReceivedSubvol:
		off = fmt.Sprintf("0x%016x", k.Offset)
	}
	return fmt.Sprintf("%s %v %s", progsObjectID(k.ObjectID, k.Type), k.Type, off)
}

func timeLine(name string, ts Timespec) string {
	return fmt.Sprintf("%s %d.%d (*", name, ts.Sec, ts.Nsec)
}

// progsLines returns the body lines dump-tree prints for a payload (a
// subset where its format is awkward to reproduce).
func progsLines(k Key, p Payload, sectorSize uint32, csumSize int) []string {
	f := fmt.Sprintf
	switch v := p.(type) {
	case *InodeItem:
		return inodeLines(v)
	case *InodeRefs:
		var out []string
		for _, r := range *v {
			out = append(out, f("index %d namelen %d name: %s", r.Index, len(r.Name), r.Name))
		}
		return out
	case *InodeExtrefs:
		var out []string
		for _, r := range *v {
			out = append(out, f("index %d parent %d namelen %d name: %s", r.Index, r.Parent, len(r.Name), r.Name))
		}
		return out
	case *DirItems:
		var out []string
		for _, d := range *v {
			out = append(out, f("location key (%s) type %v", progsKey(d.Location), d.Type),
				f("transid %d data_len %d name_len %d", d.TransID, len(d.Data), len(d.Name)), f("name: %s", d.Name))
			if len(d.Data) > 0 { // dump-tree cuts long values short
				out = append(out, f("data %s*", d.Data[:min(len(d.Data), 64)]))
			}
		}
		return out
	case *FileExtentItem:
		return fileExtentLines(v)
	case *CsumItem:
		end, _ := CsumItemEnd(k.Offset, len(*v), csumSize, sectorSize)
		return []string{f("range start %d end %d length %d", k.Offset, end, end-k.Offset)}
	case *RootItem:
		return rootItemLines(v)
	case *RootRef:
		dir := "ref"
		if k.Type == RootBackrefKey {
			dir = "backref"
		}
		return []string{f("root %s key dirid %d sequence %d name %s", dir, v.DirID, v.Sequence, v.Name)}
	case *ExtentItem:
		return extentItemLines(k, v)
	}
	return allocLines(k, p)
}

func inodeLines(v *InodeItem) []string {
	f := fmt.Sprintf
	return []string{
		f("generation %d transid %d size %d nbytes %d", v.Generation, v.TransID, v.Size, v.NBytes),
		f("block group %d mode %o links %d uid %d gid %d rdev %d", v.BlockGroup, v.Mode, v.NLink, v.UID, v.GID, v.Rdev),
		f("sequence %d flags 0x%x(%v)", v.Sequence, uint64(v.Flags), v.Flags),
		timeLine("atime", v.ATime), timeLine("ctime", v.CTime), timeLine("mtime", v.MTime), timeLine("otime", v.OTime),
	}
}

func fileExtentLines(v *FileExtentItem) []string {
	f := fmt.Sprintf
	out := []string{f("generation %d type %d (%v)", v.Generation, v.Type, v.Type)}
	switch v.Type {
	case FileExtentInline:
		return append(out, f("inline extent data size %d ram_bytes %d compression %d (%v)", len(v.InlineData), v.RAMBytes, v.Compression, v.Compression))
	case FileExtentPrealloc:
		return append(out, f("prealloc data disk byte %d nr %d", v.DiskBytenr, v.DiskNumBytes),
			f("prealloc data offset %d nr %d", v.Offset, v.NumBytes))
	}
	return append(out, f("extent data disk byte %d nr %d", v.DiskBytenr, v.DiskNumBytes),
		f("extent data offset %d nr %d ram %d", v.Offset, v.NumBytes, v.RAMBytes),
		f("extent compression %d (%v)", v.Compression, v.Compression))
}

func rootItemLines(v *RootItem) []string {
	f := fmt.Sprintf
	return []string{
		f("generation %d root_dirid %d bytenr %d byte_limit %d bytes_used %d", v.Generation, v.RootDirID, v.Bytenr, v.ByteLimit, v.BytesUsed),
		f("last_snapshot %d flags 0x%x(%v) refs %d", v.LastSnapshot, uint64(v.Flags), v.Flags, v.Refs),
		f("drop_progress key (%s) drop_level %d", progsKey(v.DropProgress), v.DropLevel),
		f("level %d generation_v2 %d", v.Level, v.GenerationV2),
		f("uuid %s", v.UUID), f("parent_uuid %s", v.ParentUUID), f("received_uuid %s", v.ReceivedUUID),
		f("ctransid %d otransid %d stransid %d rtransid %d", v.CTransID, v.OTransID, v.STransID, v.RTransID),
		timeLine("ctime", v.CTime), timeLine("otime", v.OTime), timeLine("stime", v.STime), timeLine("rtime", v.RTime),
	}
}

func extentItemLines(k Key, v *ExtentItem) []string {
	f := fmt.Sprintf
	out := []string{f("refs %d gen %d flags %v", v.Refs, v.Generation, v.Flags)}
	switch {
	case v.TreeBlock != nil:
		out = append(out, f("tree block key (%s) level %d", progsKey(v.TreeBlock.Key), v.TreeBlock.Level))
	case k.Type == MetadataItemKey:
		out = append(out, f("tree block skinny level %d", k.Offset))
	}
	for i := range v.InlineRefs {
		out = append(out, v.InlineRefs[i].String())
	}
	return out
}

func allocLines(k Key, p Payload) []string {
	f := fmt.Sprintf
	switch v := p.(type) {
	case *BlockGroupItem:
		return []string{v.String()}
	case *FreeSpaceInfo:
		return []string{v.String()}
	case *DevExtent:
		return []string{f("dev extent chunk_tree %d", v.ChunkTree),
			f("chunk_objectid %d chunk_offset %d length %d", v.ChunkObjectID, v.ChunkOffset, v.Length),
			f("chunk_tree_uuid %s", v.ChunkTreeUUID)}
	case *DevItem:
		return []string{f("devid %d total_bytes %d bytes_used %d", v.DevID, v.TotalBytes, v.BytesUsed),
			f("io_align %d io_width %d sector_size %d type %d", v.IOAlign, v.IOWidth, v.SectorSize, v.Type),
			f("generation %d start_offset %d dev_group %d", v.Generation, v.StartOffset, v.DevGroup),
			f("seek_speed %d bandwidth %d", v.SeekSpeed, v.Bandwidth), f("uuid %s", v.UUID), f("fsid %s", v.FSID)}
	case *ChunkItem:
		out := []string{f("length %d owner %d stripe_len %d type %s", v.Length, v.Owner, v.StripeLen, BlockGroupTypeString(v.Type)),
			f("io_align %d io_width %d sector_size %d", v.IOAlign, v.IOWidth, v.SectorSize),
			f("num_stripes %d sub_stripes %d", v.NumStripes, v.SubStripes)}
		for i, s := range v.Stripes {
			out = append(out, f("stripe %d devid %d offset %d", i, s.DevID, s.Offset), f("dev_uuid %s", s.DevUUID))
		}
		return out
	case *UUIDItem:
		var out []string
		for _, id := range *v {
			out = append(out, f("subvol_id %d", id))
		}
		return out
	case *DevStatsItem:
		return []string{f("persistent item objectid DEV_STATS offset %d", k.Offset), "device stats", v.String()}
	case *QgroupStatusItem:
		return []string{f("version %d generation %d flags %s scan %d", v.Version, v.Generation, QgroupStatusFlagsString(v.Flags), v.Rescan)}
	case *QgroupInfoItem:
		return []string{f("generation %d", v.Generation), f("referenced %d referenced_compressed %d", v.Rfer, v.RferCmpr),
			f("exclusive %d exclusive_compressed %d", v.Excl, v.ExclCmpr)}
	case *QgroupLimitItem:
		return []string{f("flags %x", v.Flags), f("max_referenced %d max_exclusive %d", v.MaxRfer, v.MaxExcl),
			f("rsv_referenced %d rsv_exclusive %d", v.RsvRfer, v.RsvExcl)}
	}
	return nil
}
