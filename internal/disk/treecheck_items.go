package disk

import "math/bits"

// Tree-checker rules for file extents, checksums, roots and the extent,
// chunk and dev trees. See CheckItem.

func (c *itemChecker) fileExtent() error {
	if !c.aligned(c.k.Offset) {
		return c.fail("file offset %d not sector aligned", c.k.Offset)
	}
	var fe FileExtentItem
	if err := fe.Decode(c.data); err != nil {
		return c.wrap(err)
	}
	switch {
	case !fe.Compression.Valid():
		return c.fail("unknown compression %d", fe.Compression)
	case fe.Encryption != 0:
		return c.fail("encryption %d, want 0", fe.Encryption)
	case fe.Type == FileExtentInline:
		return c.inlineExtent(&fe)
	}
	if err := c.size(FileExtentItemSize); err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		v    uint64
	}{{"ram_bytes", fe.RAMBytes}, {"disk_bytenr", uint64(fe.DiskBytenr)},
		{"disk_num_bytes", fe.DiskNumBytes}, {"offset", fe.Offset}, {"num_bytes", fe.NumBytes}} {
		if !c.aligned(f.v) {
			return c.fail("file extent %s %d not sector aligned", f.name, f.v)
		}
	}
	if _, ok := fe.End(c.k.Offset, c.p.SectorSize); !ok {
		return c.fail("file extent end overflows: offset %d + %d bytes", c.k.Offset, fe.NumBytes)
	}
	if fe.Type == FileExtentPrealloc && fe.Compression != CompressNone {
		return c.fail("compressed prealloc extent")
	}
	// Holes carry no real extent; their ram_bytes is not meaningful.
	if !fe.IsHole() {
		if end := fe.Offset + fe.NumBytes; end < fe.Offset || end > fe.RAMBytes {
			return c.fail("file extent offset %d + num_bytes %d beyond ram_bytes %d", fe.Offset, fe.NumBytes, fe.RAMBytes)
		}
	}
	return nil
}

func (c *itemChecker) inlineExtent(fe *FileExtentItem) error {
	if c.k.Offset != 0 {
		return c.fail("inline extent at file offset %d, want 0", c.k.Offset)
	}
	sector := uint64(c.p.SectorSize)
	if fe.Compression == CompressNone {
		if want := uint64(FileExtentInlineDataStart) + fe.RAMBytes; uint64(len(c.data)) != want || want < fe.RAMBytes {
			return c.fail("uncompressed inline extent item size %d, want 21 + ram_bytes %d", len(c.data), fe.RAMBytes)
		}
		if sector != 0 && fe.RAMBytes >= sector {
			return c.fail("inline extent of %d bytes, must be below sector size %d", fe.RAMBytes, sector)
		}
		return nil
	}
	if sector != 0 && (uint64(len(fe.InlineData)) >= sector || fe.RAMBytes > sector) {
		return c.fail("compressed inline extent stores %d bytes for %d, limits %d and %d",
			len(fe.InlineData), fe.RAMBytes, sector-1, sector)
	}
	return nil
}

func (c *itemChecker) csumItem() error {
	if c.k.ObjectID != ExtentCsumObjectID {
		return c.fail("csum item objectid %d, want %d", c.k.ObjectID, ExtentCsumObjectID)
	}
	if !c.aligned(c.k.Offset) {
		return c.fail("csum item offset %d not sector aligned", c.k.Offset)
	}
	if n := c.p.CsumType.Size(); c.p.CsumType.Valid() && len(c.data)%n != 0 {
		return c.fail("csum item size %d not a multiple of csum size %d", len(c.data), n)
	}
	return nil
}

func (c *itemChecker) rootItem() error {
	if err := c.rootKey(c.k, true, "root item key"); err != nil {
		return err
	}
	if len(c.data) != RootItemSize && len(c.data) != RootItemLegacySize {
		return c.fail("root item size %d, want %d or %d", len(c.data), RootItemSize, RootItemLegacySize)
	}
	var r RootItem
	_ = r.Decode(c.data)
	switch {
	case !c.genOK(r.Generation):
		return c.fail("root generation %d beyond super generation %d", r.Generation, c.p.SuperGen)
	case !c.genOK(r.GenerationV2):
		return c.fail("root generation_v2 %d beyond super generation %d", r.GenerationV2, c.p.SuperGen)
	case !c.genOK(r.LastSnapshot):
		return c.fail("root last_snapshot %d beyond super generation %d", r.LastSnapshot, c.p.SuperGen)
	case !c.aligned(uint64(r.Bytenr)):
		return c.fail("root bytenr %d not sector aligned", r.Bytenr)
	case r.Level >= MaxLevel:
		return c.fail("root level %d, max %d", r.Level, MaxLevel-1)
	case r.DropLevel >= MaxLevel:
		return c.fail("root drop_level %d, max %d", r.DropLevel, MaxLevel-1)
	case r.Flags&^RootFlagsValid != 0:
		return c.fail("unknown root flags 0x%x", uint64(r.Flags&^RootFlagsValid))
	}
	return nil
}

func (c *itemChecker) rootRef() error {
	if len(c.data) < RootRefBaseSize {
		return c.fail("root ref item size %d, need %d", len(c.data), RootRefBaseSize)
	}
	n := int(le.Uint16(c.data[16:]))
	if n > NameMax {
		return c.fail("root ref name of %d bytes, max %d", n, NameMax)
	}
	return c.size(RootRefBaseSize + n)
}

func (c *itemChecker) extentItem() error {
	if !c.aligned(uint64(c.k.ObjectID)) {
		return c.fail("extent start %d not sector aligned", c.k.ObjectID)
	}
	if c.k.Type == MetadataItemKey && c.k.Offset >= MaxLevel {
		return c.fail("metadata item level %d, max %d", c.k.Offset, MaxLevel-1)
	}
	if c.k.Type == ExtentItemKey && (c.k.Offset == 0 || !c.aligned(c.k.Offset)) {
		return c.fail("extent length %d not a positive sector multiple", c.k.Offset)
	}
	var e ExtentItem
	if err := e.DecodeAs(c.k.Type, c.data); err != nil {
		return c.wrap(err)
	}
	if err := c.extentFlags(&e); err != nil {
		return err
	}
	for i := range e.InlineRefs {
		if err := c.inlineRef(i, &e.InlineRefs[i]); err != nil {
			return err
		}
	}
	if err := CheckInlineRefOrder(e.InlineRefs); err != nil {
		return c.wrap(err)
	}
	if n := e.InlineRefCount(); n > e.Refs {
		return c.fail("inline refs count %d, more than the item's %d refs", n, e.Refs)
	}
	return nil
}

func (c *itemChecker) extentFlags(e *ExtentItem) error {
	kind := e.Flags & (ExtentFlagData | ExtentFlagTreeBlock)
	switch {
	case e.Flags&^extentFlagsKnown != 0:
		return c.fail("unknown extent flags 0x%x", uint64(e.Flags&^extentFlagsKnown))
	case bits.OnesCount64(uint64(kind)) != 1:
		return c.fail("extent flags %v: need exactly one of DATA and TREE_BLOCK", e.Flags)
	case !c.genOK(e.Generation):
		return c.fail("extent generation %d beyond super generation %d", e.Generation, c.p.SuperGen)
	}
	if kind == ExtentFlagData {
		if c.k.Type != ExtentItemKey {
			return c.fail("data extent in a METADATA_ITEM")
		}
		if e.Flags&ExtentFlagFullBackref != 0 {
			return c.fail("data extent with FULL_BACKREF")
		}
		return nil
	}
	if c.k.Type == ExtentItemKey {
		if c.p.NodeSize != 0 && c.k.Offset != uint64(c.p.NodeSize) {
			return c.fail("tree block extent length %d, want node size %d", c.k.Offset, c.p.NodeSize)
		}
		if e.TreeBlock.Level >= MaxLevel {
			return c.fail("tree block info level %d, max %d", e.TreeBlock.Level, MaxLevel-1)
		}
	}
	return nil
}

func (c *itemChecker) inlineRef(i int, r *InlineRef) error {
	switch r.Type {
	case SharedBlockRefKey, SharedDataRefKey:
		if !c.aligned(r.Offset) {
			return c.fail("inline ref %d parent %d not sector aligned", i, r.Offset)
		}
	case ExtentDataRefKey:
		if !c.aligned(r.Data.Offset) {
			return c.fail("inline data ref %d offset %d not sector aligned", i, r.Data.Offset)
		}
	}
	return nil
}

func (c *itemChecker) keyedRef() error {
	if !c.aligned(uint64(c.k.ObjectID)) {
		return c.fail("back-ref extent %d not sector aligned", c.k.ObjectID)
	}
	switch c.k.Type {
	case TreeBlockRefKey:
		return c.size(0)
	case SharedBlockRefKey, SharedDataRefKey:
		if !c.aligned(c.k.Offset) {
			return c.fail("back-ref parent %d not sector aligned", c.k.Offset)
		}
		if c.k.Type == SharedBlockRefKey {
			return c.size(0)
		}
		return c.size(SharedDataRefSize)
	}
	var refs ExtentDataRefs
	if err := refs.Decode(c.data); err != nil {
		return c.wrap(err)
	}
	for i := range refs {
		if h := refs[i].Hash(); h != c.k.Offset {
			return c.fail("data ref %d hash %#x does not match key offset", i, h)
		}
		if !c.aligned(refs[i].Offset) {
			return c.fail("data ref %d offset %d not sector aligned", i, refs[i].Offset)
		}
	}
	return nil
}

func (c *itemChecker) blockGroup() error {
	if err := c.size(BlockGroupItemSize); err != nil {
		return err
	}
	var bg BlockGroupItem
	_ = bg.Decode(c.data)
	typ := bg.Flags & BlockGroupTypeMask
	switch {
	case c.k.Offset == 0:
		return c.fail("block group of length 0")
	case bg.ChunkObjectID != FirstChunkTreeObjectID:
		return c.fail("block group chunk_objectid %d, want %d", bg.ChunkObjectID, FirstChunkTreeObjectID)
	case bg.Used > c.k.Offset:
		return c.fail("block group used %d beyond length %d", bg.Used, c.k.Offset)
	case bg.Flags&^(BlockGroupTypeMask|BlockGroupProfileMask) != 0:
		return c.fail("unknown block group flags 0x%x", bg.Flags&^(BlockGroupTypeMask|BlockGroupProfileMask))
	case bits.OnesCount64(bg.Flags&BlockGroupProfileMask) > 1:
		return c.fail("block group flags %s: several profiles", BlockGroupFlagsString(bg.Flags))
	case typ != BlockGroupData && typ != BlockGroupMetadata && typ != BlockGroupSystem &&
		typ != BlockGroupData|BlockGroupMetadata:
		return c.fail("block group flags %s: invalid type", BlockGroupFlagsString(bg.Flags))
	}
	return nil
}

func (c *itemChecker) chunk() error {
	var ch ChunkItem
	if err := ch.Decode(c.data); err != nil {
		return c.wrap(err)
	}
	if err := c.size(ch.Size()); err != nil {
		return err
	}
	if err := ch.Validate(LogicalAddr(c.k.Offset), c.p.SectorSize); err != nil {
		return c.wrap(err)
	}
	return nil
}

func (c *itemChecker) devItem() error {
	if err := c.size(DevItemSize); err != nil {
		return err
	}
	var d DevItem
	_ = d.Decode(c.data)
	switch {
	case c.k.ObjectID != DevItemsObjectID:
		return c.fail("dev item objectid %d, want %d", c.k.ObjectID, DevItemsObjectID)
	case uint64(d.DevID) != c.k.Offset:
		return c.fail("dev item devid %d does not match key", d.DevID)
	case d.BytesUsed > d.TotalBytes:
		return c.fail("dev item bytes_used %d beyond total_bytes %d", d.BytesUsed, d.TotalBytes)
	}
	return nil
}

func (c *itemChecker) devExtent() error {
	if !c.aligned(c.k.Offset) {
		return c.fail("dev extent start %d not sector aligned", c.k.Offset)
	}
	if err := c.size(DevExtentSize); err != nil {
		return err
	}
	var d DevExtent
	_ = d.Decode(c.data)
	switch {
	case d.ChunkTree != ChunkTreeObjectID:
		return c.fail("dev extent chunk_tree %d, want %d", d.ChunkTree, ChunkTreeObjectID)
	case d.ChunkObjectID != FirstChunkTreeObjectID:
		return c.fail("dev extent chunk_objectid %d, want %d", d.ChunkObjectID, FirstChunkTreeObjectID)
	case !c.aligned(uint64(d.ChunkOffset)):
		return c.fail("dev extent chunk_offset %d not sector aligned", d.ChunkOffset)
	case !c.aligned(d.Length):
		return c.fail("dev extent length %d not sector aligned", d.Length)
	}
	return nil
}

func (c *itemChecker) freeSpace() error {
	switch c.k.Type {
	case FreeSpaceInfoKey:
		return c.size(FreeSpaceInfoSize)
	case FreeSpaceExtentKey:
		return c.size(0)
	}
	if c.p.SectorSize == 0 {
		return nil
	}
	want := FreeSpaceBitmapSize(c.k.Offset, c.p.SectorSize)
	if uint64(len(c.data)) != want {
		return c.fail("free space bitmap of %d bytes for %d bytes of space, want %d", len(c.data), c.k.Offset, want)
	}
	return nil
}
