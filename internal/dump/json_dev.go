package dump

import (
	"github.com/gobtrfs/btrfs/internal/disk"
)

// JSON decoders of chunk, device, quota, uuid and miscellaneous items.

func chunkObj(c *disk.ChunkItem) obj {
	stripes := make([]obj, len(c.Stripes))
	for i, s := range c.Stripes {
		stripes[i] = obj{{"devid", uint64(s.DevID)}, {"offset", uint64(s.Offset)}, {"dev_uuid", s.DevUUID.String()}}
	}
	return obj{{"length", c.Length}, {"owner", uint64(c.Owner)}, {"stripe_len", c.StripeLen}, {"type", c.Type},
		{"type_name", blockGroupFlagsString(c.Type)}, {"io_align", c.IOAlign}, {"io_width", c.IOWidth},
		{"sector_size", c.SectorSize}, {"num_stripes", c.NumStripes}, {"sub_stripes", c.SubStripes},
		{"stripes", stripes}}
}

func chunkJSON(_ *printer, _ disk.Key, b []byte) (string, any, error) {
	var c disk.ChunkItem
	if err := c.Decode(b); err != nil {
		return "chunk", nil, err
	}
	return "chunk", chunkObj(&c), nil
}

func devItemObj(d *disk.DevItem) obj {
	return obj{{"devid", uint64(d.DevID)}, {"total_bytes", d.TotalBytes}, {"bytes_used", d.BytesUsed},
		{"io_align", d.IOAlign}, {"io_width", d.IOWidth}, {"sector_size", d.SectorSize}, {"type", d.Type},
		{"generation", uint64(d.Generation)}, {"start_offset", d.StartOffset}, {"dev_group", d.DevGroup},
		{"seek_speed", d.SeekSpeed}, {"bandwidth", d.Bandwidth}, {"uuid", d.UUID.String()}, {"fsid", d.FSID.String()}}
}

func devItemJSON(_ *printer, _ disk.Key, b []byte) (string, any, error) {
	var d disk.DevItem
	if err := d.Decode(b); err != nil {
		return "dev_item", nil, err
	}
	return "dev_item", devItemObj(&d), nil
}

func devExtentJSON(_ *printer, _ disk.Key, b []byte) (string, any, error) {
	var d disk.DevExtent
	if err := d.Decode(b); err != nil {
		return "dev_extent", nil, err
	}
	return "dev_extent", obj{{"chunk_tree", uint64(d.ChunkTree)}, {"chunk_objectid", uint64(d.ChunkObjectID)},
		{"chunk_offset", uint64(d.ChunkOffset)}, {"length", d.Length}, {"chunk_tree_uuid", d.ChunkTreeUUID.String()}}, nil
}

func qgroupStatusJSON(_ *printer, _ disk.Key, b []byte) (string, any, error) {
	var q disk.QgroupStatusItem
	if err := q.Decode(b); err != nil {
		return "qgroup_status", nil, err
	}
	o := obj{{"version", q.Version}, {"generation", uint64(q.Generation)}, {"flags", q.Flags},
		{"flag_names", qgroupStatusFlagsString(q.Flags)}, {"rescan", q.Rescan}}
	if !q.Legacy {
		o = o.add("enable_gen", uint64(q.EnableGen))
	}
	return "qgroup_status", o, nil
}

func qgroupInfoJSON(_ *printer, _ disk.Key, b []byte) (string, any, error) {
	var q disk.QgroupInfoItem
	if err := q.Decode(b); err != nil {
		return "qgroup_info", nil, err
	}
	return "qgroup_info", obj{{"generation", uint64(q.Generation)}, {"referenced", q.Rfer},
		{"referenced_compressed", q.RferCmpr}, {"exclusive", q.Excl}, {"exclusive_compressed", q.ExclCmpr}}, nil
}

func qgroupLimitJSON(_ *printer, _ disk.Key, b []byte) (string, any, error) {
	var q disk.QgroupLimitItem
	if err := q.Decode(b); err != nil {
		return "qgroup_limit", nil, err
	}
	return "qgroup_limit", obj{{"flags", q.Flags}, {"max_referenced", q.MaxRfer}, {"max_exclusive", q.MaxExcl},
		{"rsv_referenced", q.RsvRfer}, {"rsv_exclusive", q.RsvExcl}}, nil
}

func uuidJSON(_ *printer, k disk.Key, b []byte) (string, any, error) {
	var u disk.UUIDItem
	if err := u.Decode(b); err != nil {
		return "uuid", nil, err
	}
	ids := make([]uint64, len(u))
	for i, id := range u {
		ids[i] = uint64(id)
	}
	return "uuid", obj{{"uuid", disk.UUIDOfKey(k).String()}, {"subvol_ids", ids}}, nil
}

func (p *printer) stringJSON(_ disk.Key, b []byte) (string, any, error) {
	return "string", p.nameJSON(obj{}, "data", b), nil
}

func persistentJSON(_ *printer, k disk.Key, b []byte) (string, any, error) {
	if k.ObjectID != disk.DevStatsObjectID {
		return "", nil, nil
	}
	var d disk.DevStatsItem
	if err := d.Decode(b); err != nil {
		return "dev_stats", nil, err
	}
	o := obj{{"devid", k.Offset}, {"write_errs", d.WriteErrs}, {"read_errs", d.ReadErrs}, {"flush_errs", d.FlushErrs},
		{"corruption_errs", d.CorruptionErrs}, {"generation_errs", d.GenerationErrs}}
	var extra []uint64
	for off := disk.DevStatsItemSize; off+8 <= len(b); off += 8 {
		extra = append(extra, le.Uint64(b[off:]))
	}
	if len(extra) > 0 {
		o = o.add("unknown", extra)
	}
	return "dev_stats", o, nil
}

func balanceArgsObj(a *disk.BalanceArgs) obj {
	ulo, uhi := a.UsageRange()
	llo, lhi := a.LimitRange()
	return obj{{"profiles", a.Profiles}, {"usage", a.Usage}, {"usage_min", ulo}, {"usage_max", uhi},
		{"devid", uint64(a.DevID)}, {"pstart", a.PStart}, {"pend", a.PEnd}, {"vstart", a.VStart}, {"vend", a.VEnd},
		{"target", a.Target}, {"flags", a.Flags}, {"limit", a.Limit}, {"limit_min", llo}, {"limit_max", lhi},
		{"stripes_min", a.StripesMin}, {"stripes_max", a.StripesMax}}
}

func temporaryJSON(_ *printer, k disk.Key, b []byte) (string, any, error) {
	if k.ObjectID != disk.BalanceObjectID {
		return "", nil, nil
	}
	var bi disk.BalanceItem
	if err := bi.Decode(b); err != nil {
		return "balance", nil, err
	}
	return "balance", obj{{"flags", bi.Flags}, {"data", balanceArgsObj(&bi.Data)},
		{"metadata", balanceArgsObj(&bi.Meta)}, {"system", balanceArgsObj(&bi.Sys)}}, nil
}

func devReplaceJSON(_ *printer, _ disk.Key, b []byte) (string, any, error) {
	var d disk.DevReplaceItem
	if err := d.Decode(b); err != nil {
		return "dev_replace", nil, err
	}
	return "dev_replace", obj{{"src_devid", uint64(d.SrcDevID)}, {"cursor_left", d.CursorLeft},
		{"cursor_right", d.CursorRight}, {"cont_reading_from_srcdev_mode", d.ContReadingFromSrcdevMode},
		{"replace_state", d.ReplaceState}, {"time_started", d.TimeStarted}, {"time_stopped", d.TimeStopped},
		{"num_write_errors", d.NumWriteErrors}, {"num_uncorrectable_read_errors", d.NumUncorrectableReadErrors}}, nil
}

// verityJSON decodes the descriptor item at offset 0; later VERITY_DESC
// items hold descriptor bytes and go out raw.
func verityJSON(_ *printer, k disk.Key, b []byte) (string, any, error) {
	if k.Offset != 0 {
		return "", nil, nil
	}
	var v disk.VerityDescItem
	if err := v.Decode(b); err != nil {
		return "verity_desc", nil, err
	}
	return "verity_desc", obj{{"size", v.DescSize}, {"encryption", v.Encryption}}, nil
}
