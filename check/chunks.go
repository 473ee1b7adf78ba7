package check

import (
	"sort"

	"github.com/gobtrfs/btrfs/internal/disk"
)

// devExtKey locates a device extent.
type devExtKey struct {
	dev  disk.DevID
	phys disk.PhysicalAddr
}

// checkDevExtents compares the dev tree's device extents with the
// chunks' stripes (each stripe exactly one device extent of the right
// length and owner, no two overlapping) and each device item's bytes_used
// with the sum of its device extents.
func (c *checker) checkDevExtents() {
	type want struct {
		chunk  disk.LogicalAddr
		length uint64
		found  bool
	}
	wanted := map[devExtKey]*want{}
	for ch := range c.m.All() {
		for _, de := range ch.DevExtents() {
			wanted[devExtKey{de.DevID, de.Physical}] = &want{chunk: ch.Logical(), length: de.Length}
		}
	}
	used := map[disk.DevID]uint64{}
	type span struct {
		phys disk.PhysicalAddr
		len  uint64
	}
	perDev := map[disk.DevID][]span{}
	if t, ok := c.tree(disk.DevTreeObjectID); ok {
		c.forEachItem(t, func(k disk.Key, data []byte, leaf disk.Node) error {
			if k.Type != disk.DevExtentKey {
				return nil
			}
			kk := k
			var de disk.DevExtent
			if err := de.Decode(data); err != nil {
				c.problemf(KindItem, disk.DevTreeObjectID, leaf.Bytenr(), &kk, "dev extent %v: %v", k, err)
				return nil
			}
			dev, phys := disk.DevID(k.ObjectID), disk.PhysicalAddr(k.Offset)
			used[dev] += de.Length
			perDev[dev] = append(perDev[dev], span{phys, de.Length})
			w := wanted[devExtKey{dev, phys}]
			if w == nil || w.chunk != de.ChunkOffset || w.length != de.Length {
				c.problemf(KindChunk, disk.DevTreeObjectID, 0, &kk, "Device extent[%d, %d, %d] didn't find the relative chunk.", dev, phys, de.Length)
				return nil
			}
			w.found = true
			return nil
		})
	} else {
		c.problemf(KindRootItem, disk.DevTreeObjectID, 0, nil, "dev tree root item missing")
	}
	keys := make([]devExtKey, 0, len(wanted))
	for k, w := range wanted {
		if !w.found {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].dev != keys[j].dev {
			return keys[i].dev < keys[j].dev
		}
		return keys[i].phys < keys[j].phys
	})
	for _, k := range keys {
		w := wanted[k]
		c.problemf(KindChunk, disk.ChunkTreeObjectID, w.chunk, nil, "chunk[%d %d] stripe on device %d at %d has no device extent", w.chunk, w.length, k.dev, k.phys)
	}
	for dev, spans := range perDev {
		sort.Slice(spans, func(i, j int) bool { return spans[i].phys < spans[j].phys })
		for i := 1; i < len(spans); i++ {
			if spans[i-1].phys+disk.PhysicalAddr(spans[i-1].len) > spans[i].phys {
				c.problemf(KindChunk, disk.DevTreeObjectID, 0, nil, "device %d extent at %d overlaps the one at %d", dev, spans[i].phys, spans[i-1].phys)
			}
		}
	}
	var devBytes uint64
	var numDevs uint64
	ct, _ := c.tree(disk.ChunkTreeObjectID)
	c.forEachItem(ct, func(k disk.Key, data []byte, leaf disk.Node) error {
		if k.Type != disk.DevItemKey {
			return nil
		}
		kk := k
		var di disk.DevItem
		if err := di.Decode(data); err != nil {
			c.problemf(KindItem, disk.ChunkTreeObjectID, leaf.Bytenr(), &kk, "dev item %v: %v", k, err)
			return nil
		}
		devBytes += di.TotalBytes
		numDevs++
		if di.BytesUsed != used[di.DevID] {
			c.problemf(KindChunk, disk.ChunkTreeObjectID, 0, &kk, "Dev extent's total-byte(%d) is not equal to byte-used(%d) in dev[%d, %d, %d]",
				used[di.DevID], di.BytesUsed, k.ObjectID, k.Type, k.Offset)
		}
		for _, s := range perDev[di.DevID] {
			if uint64(s.phys)+s.len > di.TotalBytes {
				c.problemf(KindChunk, disk.DevTreeObjectID, 0, &kk, "device %d extent at %d ends beyond the device size %d", di.DevID, s.phys, di.TotalBytes)
			}
		}
		return nil
	})
	if numDevs != c.sb.NumDevices {
		c.problemf(KindSuperblock, 0, 0, nil, "ERROR: super num devices %d mismatch, have %d devices", c.sb.NumDevices, numDevs)
	}
	if devBytes > c.sb.TotalBytes {
		c.problemf(KindSuperblock, 0, 0, nil, "ERROR: super total bytes %d smaller than real device(s) size %d", c.sb.TotalBytes, devBytes)
	}
}
