package check

import (
	"encoding/binary"
	"fmt"
	"math"
	"sort"

	"github.com/gobtrfs/btrfs/internal/disk"
)

// The v1 free space cache (space_cache=v1): per block group, a header
// item (FREE_SPACE, 0, group start) in the root tree names an inode of
// the root tree whose file holds the group's free space. The file is cut
// into 4 KiB pages: page 0 opens with one CRC-32C per page and the
// cache's generation, then come the entries (offset, bytes, type: 17
// bytes, never across a page end), then one page per bitmap entry, in
// entry order. btrfs check (original mode) loads each cache it trusts
// and wants it to hold exactly the free space the extent tree leaves,
// less the superblock copies; its words are used for what it reports.

const (
	v1PageSize        = 4096
	v1HeaderSize      = disk.KeySize + 3*8
	v1EntrySize       = 8 + 8 + 1
	v1EntryExtent     = 1
	v1EntryBitmap     = 2
	v1MaxCacheFile    = 64 << 20 // no group needs more; a bigger size is corrupt
	v1BitmapBitsBytes = v1PageSize
)

// v1Header is a free space header item.
type v1Header struct {
	bg         disk.LogicalAddr
	ino        disk.ObjectID
	generation uint64
	entries    uint64
	bitmaps    uint64
}

// v1Inode is what the root tree says about one cache inode.
type v1Inode struct {
	hasItem bool
	item    disk.InodeItem
	extents []v1Extent
}

// v1Extent maps file bytes [off, off+len) to logical addresses from addr.
type v1Extent struct {
	off, len uint64
	addr     disk.LogicalAddr // 0 for a hole or a prealloc extent (zeros)
}

// checkSpaceCacheV1 checks the v1 free space cache of every block group
// that has one.
func (c *checker) checkSpaceCacheV1() error {
	gen := uint64(c.sb.CacheGeneration)
	if gen != math.MaxUint64 && gen != uint64(c.sb.Generation) {
		c.log("cache and super generation don't match, space cache will be invalidated")
		return nil
	}
	t, ok := c.tree(disk.RootTreeObjectID)
	if !ok {
		return nil
	}
	headers := map[disk.LogicalAddr]v1Header{}
	inodes := map[disk.ObjectID]*v1Inode{}
	err := c.forEachItem(t, func(k disk.Key, data []byte, leaf disk.Node) error {
		switch {
		case k.ObjectID == disk.FreeSpaceObjectID && k.Type == 0:
			if len(data) < v1HeaderSize {
				return nil
			}
			var loc disk.Key
			loc.Decode(data)
			le := binary.LittleEndian
			headers[disk.LogicalAddr(k.Offset)] = v1Header{bg: disk.LogicalAddr(k.Offset), ino: loc.ObjectID,
				generation: le.Uint64(data[disk.KeySize:]), entries: le.Uint64(data[disk.KeySize+8:]), bitmaps: le.Uint64(data[disk.KeySize+16:])}
		case k.ObjectID >= disk.FirstFreeObjectID && k.ObjectID <= disk.LastFreeObjectID && k.Type == disk.InodeItemKey:
			in := inodes[k.ObjectID]
			if in == nil {
				in = &v1Inode{}
				inodes[k.ObjectID] = in
			}
			in.hasItem = in.item.Decode(data) == nil
		case k.ObjectID >= disk.FirstFreeObjectID && k.ObjectID <= disk.LastFreeObjectID && k.Type == disk.ExtentDataKey:
			var fe disk.FileExtentItem
			if fe.Decode(data) != nil || fe.Type == disk.FileExtentInline || fe.Compression != disk.CompressNone {
				return nil
			}
			in := inodes[k.ObjectID]
			if in == nil {
				in = &v1Inode{}
				inodes[k.ObjectID] = in
			}
			e := v1Extent{off: k.Offset, len: fe.NumBytes}
			if fe.Type == disk.FileExtentReg && fe.DiskBytenr != 0 {
				e.addr = fe.DiskBytenr + disk.LogicalAddr(fe.Offset)
			}
			in.extents = append(in.extents, e)
		}
		return nil
	})
	if err != nil {
		return err
	}
	ei := 0
	for _, bg := range c.bgs {
		if err := c.ctx.Err(); err != nil {
			return err
		}
		end := bg.start + disk.LogicalAddr(bg.length)
		used := c.usedIn(&ei, bg.start, end)
		h, ok := headers[bg.start]
		if !ok {
			continue
		}
		in := inodes[h.ino]
		runs, ok := c.loadSpaceCacheV1(h, in)
		if !ok {
			continue
		}
		supers := c.superRanges(bg.start)
		var superBytes uint64
		for _, s := range supers {
			superBytes += s.len
		}
		free := total(runs)
		var groupFree uint64
		if bg.length >= bg.item.Used+superBytes {
			groupFree = bg.length - bg.item.Used - superBytes
		}
		if free != groupFree {
			c.log("block group %d has wrong amount of free space, free space cache has %d block group has %d", bg.start, free, groupFree)
			if free > groupFree {
				c.problemf(KindFreeSpace, disk.RootTreeObjectID, bg.start, nil, "ERROR: free space cache has more free space than block group item, this could leads to serious corruption, please contact btrfs developers")
			}
			c.log("failed to load free space cache for block group %d", bg.start)
			continue
		}
		used = append(used, supers...)
		want := freeRuns(bg.start, end, used)
		if msg := compareCacheRuns(want, runs); msg != "" {
			c.problemf(KindFreeSpace, disk.RootTreeObjectID, bg.start, nil, "%s", msg)
			c.log("cache appears valid but isn't %d", bg.start)
		}
	}
	return nil
}

// superRanges returns the parts of the block group at start that hold
// superblock copies (or lie below 64 KiB), sorted.
func (c *checker) superRanges(start disk.LogicalAddr) []span {
	ch, err := c.m.Lookup(start)
	if err != nil {
		return nil
	}
	var out []span
	for _, r := range ch.SuperblockExclusions() {
		out = append(out, span{r.Start, r.Length})
	}
	return out
}

// compareCacheRuns compares the free runs the extent tree leaves (want)
// with the cache's (have), in address order, and describes the first
// difference as btrfs check does; "" when they agree.
func compareCacheRuns(want, have []span) string {
	left := len(have)
	for _, w := range want {
		i := sort.Search(len(have), func(i int) bool { return have[i].end() > w.start })
		if i == len(have) || have[i].start > w.start {
			return fmt.Sprintf("there is no free space entry for %d-%d", w.start, w.end())
		}
		if have[i].start != w.start {
			return fmt.Sprintf("wanted offset %d, found %d", w.start, have[i].start)
		}
		if have[i].len != w.len {
			return fmt.Sprintf("wanted bytes %d, found %d for off %d", w.len, have[i].len, w.start)
		}
		left--
	}
	if left > 0 {
		return "there are still entries left in the space cache"
	}
	return ""
}

// loadSpaceCacheV1 reads the cache file of header h and returns its free
// runs, sorted and merged; false when the cache is not to be trusted
// (btrfs check and the kernel then ignore it).
func (c *checker) loadSpaceCacheV1(h v1Header, in *v1Inode) ([]span, bool) {
	if h.entries == 0 && h.bitmaps == 0 {
		return nil, false
	}
	if in == nil || !in.hasItem {
		return nil, false
	}
	if uint64(in.item.Generation) != h.generation {
		return nil, false // a stale cache: the kernel ignores it
	}
	size := in.item.Size
	if size == 0 || size%v1PageSize != 0 || size > v1MaxCacheFile {
		return nil, false
	}
	npages := size / v1PageSize
	if 4*npages+8 > v1PageSize {
		return nil, false
	}
	file := make([]byte, size)
	for _, e := range in.extents {
		if e.addr == 0 || e.off >= size {
			continue
		}
		n := min(e.len, size-e.off)
		if err := c.rd.ReadLogical(file[e.off:e.off+n], e.addr, nil); err != nil {
			c.log("failed to load free space cache for block group %d", h.bg)
			return nil, false
		}
	}
	le := binary.LittleEndian
	for p := uint64(0); p < npages; p++ {
		from := p * v1PageSize
		if p == 0 {
			from = 4 * npages
		}
		if disk.CRC32C(file[from:(p+1)*v1PageSize]) != le.Uint32(file[4*p:]) {
			c.log("btrfs: csum mismatch on free space cache")
			c.log("failed to load free space cache for block group %d", h.bg)
			return nil, false
		}
	}
	if le.Uint64(file[4*npages:]) != h.generation {
		c.log("failed to load free space cache for block group %d", h.bg)
		return nil, false
	}
	ss := uint64(c.sb.SectorSize)
	var runs []span
	var bitmapOffs []uint64
	pos := 4*npages + 8
	for i := uint64(0); i < h.entries; i++ {
		if pos%v1PageSize+v1EntrySize > v1PageSize {
			pos = (pos/v1PageSize + 1) * v1PageSize
		}
		if pos+v1EntrySize > size {
			c.log("failed to load free space cache for block group %d", h.bg)
			return nil, false
		}
		off, n, typ := le.Uint64(file[pos:]), le.Uint64(file[pos+8:]), file[pos+16]
		pos += v1EntrySize
		switch typ {
		case v1EntryExtent:
			if n > 0 {
				runs = append(runs, span{disk.LogicalAddr(off), n})
			}
		case v1EntryBitmap:
			bitmapOffs = append(bitmapOffs, off)
		default:
			c.log("failed to load free space cache for block group %d", h.bg)
			return nil, false
		}
	}
	if uint64(len(bitmapOffs)) != h.bitmaps {
		c.log("failed to load free space cache for block group %d", h.bg)
		return nil, false
	}
	page := (pos + v1PageSize - 1) / v1PageSize
	for _, off := range bitmapOffs {
		if page >= npages {
			c.log("failed to load free space cache for block group %d", h.bg)
			return nil, false
		}
		bm := file[page*v1PageSize : (page+1)*v1PageSize]
		page++
		for first, n := range disk.BitmapRuns(bm, v1BitmapBitsBytes*8) {
			runs = append(runs, span{disk.LogicalAddr(off + first*ss), n * ss})
		}
	}
	sort.Slice(runs, func(i, j int) bool { return runs[i].start < runs[j].start })
	var merged []span
	for _, r := range runs {
		merged = appendMerged(merged, r)
	}
	return merged, true
}
