package dump

import (
	"encoding/hex"
	"fmt"

	"github.com/gobtrfs/btrfs/internal/disk"
)

// decodeItem decodes one item payload for the JSON form with the strict
// decoders of package disk. kind is "" for types without a decoder (their
// bytes go out as "raw").
func (p *printer) decodeItem(k disk.Key, b []byte) (kind string, data any, err error) {
	if k.Type == 0 && k.ObjectID == disk.FreeSpaceObjectID {
		return p.freeSpaceHeaderJSON(b)
	}
	if fn := jsonDecoders[k.Type]; fn != nil {
		return fn(p, k, b)
	}
	switch k.Type {
	case disk.OrphanItemKey, disk.TreeBlockRefKey, disk.SharedBlockRefKey, disk.FreeSpaceExtentKey, disk.QgroupRelationKey:
		return "empty", nil, nil
	}
	return "", nil, nil
}

type jsonDecoder func(p *printer, k disk.Key, b []byte) (string, any, error)

var jsonDecoders map[disk.KeyType]jsonDecoder

func init() {
	jsonDecoders = map[disk.KeyType]jsonDecoder{
		disk.InodeItemKey:          (*printer).inodeJSON,
		disk.InodeRefKey:           (*printer).inodeRefJSON,
		disk.InodeExtrefKey:        (*printer).inodeExtrefJSON,
		disk.DirItemKey:            (*printer).dirJSON,
		disk.DirIndexKey:           (*printer).dirJSON,
		disk.XattrItemKey:          (*printer).dirJSON,
		disk.DirLogItemKey:         dirLogJSON,
		disk.DirLogIndexKey:        dirLogJSON,
		disk.ExtentDataKey:         fileExtentJSON,
		disk.RootItemKey:           rootItemJSON,
		disk.RootRefKey:            (*printer).rootRefJSON,
		disk.RootBackrefKey:        (*printer).rootRefJSON,
		disk.ExtentItemKey:         extentItemJSON,
		disk.MetadataItemKey:       extentItemJSON,
		disk.ExtentDataRefKey:      extentDataRefJSON,
		disk.SharedDataRefKey:      sharedDataRefJSON,
		disk.ExtentCsumKey:         (*printer).csumJSON,
		disk.BlockGroupItemKey:     blockGroupJSON,
		disk.FreeSpaceInfoKey:      freeSpaceInfoJSON,
		disk.FreeSpaceBitmapKey:    freeSpaceBitmapJSON,
		disk.ChunkItemKey:          chunkJSON,
		disk.DevItemKey:            devItemJSON,
		disk.DevExtentKey:          devExtentJSON,
		disk.QgroupStatusKey:       qgroupStatusJSON,
		disk.QgroupInfoKey:         qgroupInfoJSON,
		disk.QgroupLimitKey:        qgroupLimitJSON,
		disk.UUIDKeySubvol:         uuidJSON,
		disk.UUIDKeyReceivedSubvol: uuidJSON,
		disk.StringItemKey:         (*printer).stringJSON,
		disk.PersistentItemKey:     persistentJSON,
		disk.TemporaryItemKey:      temporaryJSON,
		disk.DevReplaceKey:         devReplaceJSON,
		disk.VerityDescItemKey:     verityJSON,
	}
}

// need reports a payload shorter than a fixed structure.
func need(b []byte, n int, what string) error {
	if len(b) < n {
		return fmt.Errorf("%s: %d bytes, need %d", what, len(b), n)
	}
	return nil
}

func inodeObj(it *disk.InodeItem) obj {
	return obj{{"generation", uint64(it.Generation)}, {"transid", uint64(it.TransID)}, {"size", it.Size},
		{"nbytes", it.NBytes}, {"block_group", it.BlockGroup}, {"mode", it.Mode}, {"nlink", it.NLink},
		{"uid", it.UID}, {"gid", it.GID}, {"rdev", it.Rdev}, {"sequence", it.Sequence},
		{"flags", uint64(it.Flags)}, {"flag_names", inodeFlagsString(uint64(it.Flags))},
		{"atime", timeJSON(it.ATime)}, {"ctime", timeJSON(it.CTime)}, {"mtime", timeJSON(it.MTime)},
		{"otime", timeJSON(it.OTime)}}
}

func (p *printer) inodeJSON(_ disk.Key, b []byte) (string, any, error) {
	var it disk.InodeItem
	if err := it.Decode(b); err != nil {
		return "inode_item", nil, err
	}
	return "inode_item", inodeObj(&it), nil
}

func (p *printer) inodeRefJSON(_ disk.Key, b []byte) (string, any, error) {
	refs, err := disk.ParseInodeRefs(b)
	if err != nil {
		return "inode_ref", nil, err
	}
	out := make([]obj, len(refs))
	for i, r := range refs {
		out[i] = p.nameJSON(obj{{"index", r.Index}}, "name", r.Name)
	}
	return "inode_ref", obj{{"refs", out}}, nil
}

func (p *printer) inodeExtrefJSON(_ disk.Key, b []byte) (string, any, error) {
	refs, err := disk.ParseInodeExtrefs(b)
	if err != nil {
		return "inode_extref", nil, err
	}
	out := make([]obj, len(refs))
	for i, r := range refs {
		out[i] = p.nameJSON(obj{{"parent", uint64(r.Parent)}, {"index", r.Index}}, "name", r.Name)
	}
	return "inode_extref", obj{{"refs", out}}, nil
}

func (p *printer) dirJSON(_ disk.Key, b []byte) (string, any, error) {
	items, err := disk.ParseDirItems(b)
	if err != nil {
		return "dir_item", nil, err
	}
	out := make([]obj, len(items))
	for i, d := range items {
		e := obj{{"location", keyJSON(d.Location)}, {"type", uint8(d.Type)}, {"type_name", dirTypeString(uint8(d.Type))},
			{"transid", uint64(d.TransID)}}
		e = p.nameJSON(e, "name", d.Name)
		if p.o.HideNames {
			e = e.add("data_hex", "HIDDEN")
		} else {
			e = e.add("data_hex", hex.EncodeToString(d.Data))
		}
		out[i] = e
	}
	return "dir_item", obj{{"entries", out}}, nil
}

func dirLogJSON(_ *printer, _ disk.Key, b []byte) (string, any, error) {
	if err := need(b, 8, "dir log item"); err != nil {
		return "dir_log", nil, err
	}
	return "dir_log", obj{{"end", le.Uint64(b)}}, nil
}

func fileExtentJSON(_ *printer, _ disk.Key, b []byte) (string, any, error) {
	var fe disk.FileExtentItem
	if err := fe.Decode(b); err != nil {
		return "file_extent", nil, err
	}
	o := obj{{"generation", uint64(fe.Generation)}, {"type", uint8(fe.Type)}, {"type_name", fileExtentTypeString(uint8(fe.Type))},
		{"ram_bytes", fe.RAMBytes}, {"compression", uint8(fe.Compression)}, {"compression_name", compressString(uint8(fe.Compression))},
		{"encryption", fe.Encryption}, {"other_encoding", fe.OtherEncoding}}
	if fe.Type == disk.FileExtentInline {
		return "file_extent", o.add("inline_size", len(fe.InlineData)), nil
	}
	return "file_extent", o.add("disk_bytenr", uint64(fe.DiskBytenr)).add("disk_num_bytes", fe.DiskNumBytes).
		add("offset", fe.Offset).add("num_bytes", fe.NumBytes), nil
}

func rootItemJSON(_ *printer, _ disk.Key, b []byte) (string, any, error) {
	var r disk.RootItem
	if err := r.Decode(b); err != nil {
		return "root_item", nil, err
	}
	o := obj{{"inode", inodeObj(&r.Inode)}, {"generation", uint64(r.Generation)}, {"root_dirid", uint64(r.RootDirID)},
		{"bytenr", uint64(r.Bytenr)}, {"byte_limit", r.ByteLimit}, {"bytes_used", r.BytesUsed},
		{"last_snapshot", uint64(r.LastSnapshot)}, {"flags", uint64(r.Flags)}, {"refs", r.Refs},
		{"drop_progress", keyJSON(r.DropProgress)}, {"drop_level", r.DropLevel}, {"level", r.Level},
		{"legacy", r.Legacy}}
	if r.Legacy {
		return "root_item", o, nil
	}
	return "root_item", o.add("generation_v2", uint64(r.GenerationV2)).add("uuid", r.UUID.String()).
		add("parent_uuid", r.ParentUUID.String()).add("received_uuid", r.ReceivedUUID.String()).
		add("ctransid", uint64(r.CTransID)).add("otransid", uint64(r.OTransID)).
		add("stransid", uint64(r.STransID)).add("rtransid", uint64(r.RTransID)).
		add("ctime", timeJSON(r.CTime)).add("otime", timeJSON(r.OTime)).
		add("stime", timeJSON(r.STime)).add("rtime", timeJSON(r.RTime)), nil
}

func (p *printer) rootRefJSON(_ disk.Key, b []byte) (string, any, error) {
	var r disk.RootRef
	if err := r.Decode(b); err != nil {
		return "root_ref", nil, err
	}
	o := obj{{"dirid", uint64(r.DirID)}, {"sequence", r.Sequence}}
	q := *p
	q.o.HideNames = false // progs shows subvolume names even with --hide-names
	return "root_ref", q.nameJSON(o, "name", r.Name), nil
}

func dataRefObj(r disk.ExtentDataRef) obj {
	return obj{{"root", uint64(r.Root)}, {"objectid", uint64(r.ObjectID)}, {"offset", r.Offset}, {"count", r.Count}}
}

func extentItemJSON(_ *printer, k disk.Key, b []byte) (string, any, error) {
	var e disk.ExtentItem
	if err := e.DecodeAs(k.Type, b); err != nil {
		return "extent_item", nil, err
	}
	o := obj{{"refs", e.Refs}, {"generation", uint64(e.Generation)}, {"flags", uint64(e.Flags)},
		{"flag_names", extentFlagsString(uint64(e.Flags))}}
	switch {
	case k.Type == disk.MetadataItemKey:
		o = o.add("level", k.Offset)
	case e.TreeBlock != nil:
		o = o.add("tree_block", obj{{"key", keyJSON(e.TreeBlock.Key)}, {"level", e.TreeBlock.Level}})
	}
	refs := make([]obj, len(e.InlineRefs))
	for i, r := range e.InlineRefs {
		ro := obj{{"type", uint8(r.Type)}, {"type_name", keyTypeString(0, r.Type)}}
		switch r.Type {
		case disk.TreeBlockRefKey, disk.ExtentOwnerRefKey:
			ro = ro.add("root", r.Offset)
		case disk.SharedBlockRefKey:
			ro = ro.add("parent", r.Offset)
		case disk.ExtentDataRefKey:
			ro = append(ro, dataRefObj(r.Data)...)
		case disk.SharedDataRefKey:
			ro = ro.add("parent", r.Offset).add("count", r.Count)
		}
		refs[i] = ro
	}
	return "extent_item", o.add("inline_refs", refs), nil
}

func extentDataRefJSON(_ *printer, _ disk.Key, b []byte) (string, any, error) {
	var rs disk.ExtentDataRefs
	if err := rs.Decode(b); err != nil {
		return "extent_data_ref", nil, err
	}
	out := make([]obj, len(rs))
	for i, r := range rs {
		out[i] = dataRefObj(r)
	}
	return "extent_data_ref", obj{{"refs", out}}, nil
}

func sharedDataRefJSON(_ *printer, _ disk.Key, b []byte) (string, any, error) {
	var r disk.SharedDataRef
	if err := r.Decode(b); err != nil {
		return "shared_data_ref", nil, err
	}
	return "shared_data_ref", obj{{"count", r.Count}}, nil
}

func (p *printer) csumJSON(k disk.Key, b []byte) (string, any, error) {
	cs := p.o.csumSize()
	n := uint64(len(b) / cs)
	ss := p.o.sectorSize()
	o := obj{{"start", k.Offset}, {"end", k.Offset + n*ss}, {"length", n * ss}}
	if len(b)%cs != 0 {
		return "extent_csum", nil, fmt.Errorf("csum item of %d bytes is not a multiple of %d", len(b), cs)
	}
	if p.o.CsumItems {
		sums := make([]string, n)
		for i := range sums {
			sums[i] = hex.EncodeToString(b[i*cs : (i+1)*cs])
		}
		o = o.add("sums", sums)
	}
	return "extent_csum", o, nil
}

func blockGroupJSON(_ *printer, _ disk.Key, b []byte) (string, any, error) {
	var bg disk.BlockGroupItem
	if err := bg.Decode(b); err != nil {
		return "block_group", nil, err
	}
	return "block_group", obj{{"used", bg.Used}, {"chunk_objectid", uint64(bg.ChunkObjectID)},
		{"flags", bg.Flags}, {"flag_names", blockGroupFlagsString(bg.Flags)}}, nil
}

func freeSpaceInfoJSON(_ *printer, _ disk.Key, b []byte) (string, any, error) {
	var f disk.FreeSpaceInfo
	if err := f.Decode(b); err != nil {
		return "free_space_info", nil, err
	}
	return "free_space_info", obj{{"extent_count", f.ExtentCount}, {"flags", f.Flags}}, nil
}

func freeSpaceBitmapJSON(_ *printer, _ disk.Key, b []byte) (string, any, error) {
	return "free_space_bitmap", obj{{"bitmap_hex", hex.EncodeToString(b)}}, nil
}

func (p *printer) freeSpaceHeaderJSON(b []byte) (string, any, error) {
	if err := need(b, 41, "free space header"); err != nil {
		return "free_space_header", nil, err
	}
	return "free_space_header", obj{{"location", keyJSON(disk.KeyAt(b))}, {"generation", le.Uint64(b[17:])},
		{"num_entries", le.Uint64(b[25:])}, {"num_bitmaps", le.Uint64(b[33:])}}, nil
}
