package disk

// Payload is a decoded item body. Every decoded type is a pointer (for
// example *InodeItem, *DirItems, *ExtentItem); callers type-switch on it.
type Payload interface {
	// Encode writes the payload into b, which must hold PayloadSize bytes.
	Encode(b []byte)
}

// RawItem is the payload of item types this package does not interpret
// (DIR_LOG_*, VERITY_MERKLE, RAID_STRIPE, unknown types): the bytes as stored.
type RawItem []byte

// Decode copies b.
func (r *RawItem) Decode(b []byte) error {
	*r = cloneTight(b)
	return nil
}

// Size is the item size.
func (r *RawItem) Size() int { return len(*r) }

// Encode writes the bytes into b.
func (r *RawItem) Encode(b []byte) { copy(b[:len(*r)], *r) }

// PayloadSize is the encoded size of p.
func PayloadSize(p Payload) int {
	switch v := p.(type) {
	case *InodeItem:
		return InodeItemSize
	case *DevItem:
		return DevItemSize
	case interface{ Size() int }:
		return v.Size()
	}
	panic("disk: payload type without a size")
}

// EncodePayload returns the encoded bytes of p.
func EncodePayload(p Payload) []byte {
	b := make([]byte, PayloadSize(p))
	p.Encode(b)
	return b
}

// newPayload returns a zero payload of the type that items with key k hold.
func newPayload(k Key) interface {
	Payload
	Decode([]byte) error
} {
	switch k.Type {
	case InodeItemKey:
		return new(InodeItem)
	case InodeRefKey:
		return new(InodeRefs)
	case InodeExtrefKey:
		return new(InodeExtrefs)
	case XattrItemKey, DirItemKey, DirIndexKey:
		return new(DirItems)
	case ExtentDataKey:
		return new(FileExtentItem)
	case ExtentCsumKey:
		return new(CsumItem)
	case RootItemKey:
		return new(RootItem)
	case RootRefKey, RootBackrefKey:
		return new(RootRef)
	case ExtentDataRefKey:
		return new(ExtentDataRefs)
	case SharedDataRefKey:
		return new(SharedDataRef)
	case OrphanItemKey, TreeBlockRefKey, SharedBlockRefKey, FreeSpaceExtentKey, QgroupRelationKey:
		return new(EmptyItem)
	case BlockGroupItemKey:
		return new(BlockGroupItem)
	case FreeSpaceInfoKey:
		return new(FreeSpaceInfo)
	case FreeSpaceBitmapKey:
		return new(FreeSpaceBitmap)
	case DevExtentKey:
		return new(DevExtent)
	case DevItemKey:
		return new(DevItem)
	case ChunkItemKey:
		return new(ChunkItem)
	case QgroupStatusKey:
		return new(QgroupStatusItem)
	case QgroupInfoKey:
		return new(QgroupInfoItem)
	case QgroupLimitKey:
		return new(QgroupLimitItem)
	case DevReplaceKey:
		return new(DevReplaceItem)
	case UUIDKeySubvol, UUIDKeyReceivedSubvol:
		return new(UUIDItem)
	case StringItemKey:
		return new(StringItem)
	}
	return newSpecialPayload(k)
}

// newSpecialPayload handles key types whose layout depends on the objectid
// or offset as well.
func newSpecialPayload(k Key) interface {
	Payload
	Decode([]byte) error
} {
	switch {
	case k.Type == VerityDescItemKey && k.Offset == 0:
		return new(VerityDescItem)
	case k.Type == TemporaryItemKey && k.ObjectID == BalanceObjectID:
		return new(BalanceItem)
	case k.Type == PersistentItemKey && k.ObjectID == DevStatsObjectID:
		return new(DevStatsItem)
	}
	return new(RawItem)
}

// DecodeItem decodes the payload of the item with key k. Item types and
// objectids this package does not interpret decode to *RawItem. The result
// does not alias data.
func DecodeItem(k Key, data []byte) (Payload, error) {
	if k.Type == ExtentItemKey || k.Type == MetadataItemKey {
		e := new(ExtentItem)
		if err := e.DecodeAs(k.Type, data); err != nil {
			return nil, err
		}
		return e, nil
	}
	p := newPayload(k)
	if err := p.Decode(data); err != nil {
		return nil, err
	}
	return p, nil
}
