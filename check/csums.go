package check

import (
	"bytes"
	"sort"
	"sync"

	"github.com/gobtrfs/btrfs/internal/chunk"
	"github.com/gobtrfs/btrfs/internal/disk"
)

// csumRange is one csum item: the sums of the sectors from start on.
type csumRange struct {
	start disk.LogicalAddr
	sums  []byte
}

// checkCsums checks the csum tree: items only for data extents that
// exist, none overlapping; with DataCsum, every covered sector on every
// mirror is read and verified.
func (c *checker) checkCsums() error {
	t, ok := c.tree(disk.CsumTreeObjectID)
	if !ok {
		c.problemf(KindRootItem, disk.CsumTreeObjectID, 0, nil, "csum tree root item missing")
		return nil
	}
	data := make([]extentRec, 0, len(c.extents))
	for _, e := range c.extents {
		if !e.meta {
			data = append(data, e)
		}
	}
	ss := uint64(c.sb.SectorSize)
	csize := c.sb.CsumType.Size()
	var prevEnd disk.LogicalAddr
	var work []csumRange
	var pending int
	flushWork := func() {
		if len(work) > 0 {
			c.verifyData(work)
			work = nil
			pending = 0
		}
	}
	err := c.forEachItem(t, func(k disk.Key, item []byte, leaf disk.Node) error {
		if k.ObjectID != disk.ExtentCsumObjectID || k.Type != disk.ExtentCsumKey {
			return nil
		}
		kk := k
		if csize == 0 || len(item)%csize != 0 {
			c.problemf(KindCsum, disk.CsumTreeObjectID, leaf.Bytenr(), &kk, "csum item %v size %d is not a multiple of %d", k, len(item), csize)
			return nil
		}
		start := disk.LogicalAddr(k.Offset)
		n := uint64(len(item) / csize)
		end := start + disk.LogicalAddr(n*ss)
		c.report.Summary.CsumBytes += uint64(len(item))
		if start < prevEnd {
			c.problemf(KindCsum, disk.CsumTreeObjectID, start, &kk, "csum item %v overlaps the previous one, which ends at %d", k, prevEnd)
		}
		prevEnd = max(prevEnd, end)
		c.csumCovered(data, start, end, &kk)
		if c.opts.DataCsum {
			work = append(work, csumRange{start: start, sums: bytes.Clone(item)})
			pending += len(item)
			if pending >= 1<<20 {
				flushWork()
			}
		}
		return nil
	})
	flushWork()
	return err
}

// csumCovered reports the parts of [start, end) not inside a data extent.
func (c *checker) csumCovered(data []extentRec, start, end disk.LogicalAddr, k *disk.Key) {
	i := sort.Search(len(data), func(i int) bool { return data[i].end() > start })
	pos := start
	for ; i < len(data) && pos < end; i++ {
		e := data[i]
		if e.start > pos {
			break
		}
		pos = max(pos, e.end())
	}
	if pos < end && !spansCover(c.logData, pos, end) {
		c.problemf(KindCsum, disk.CsumTreeObjectID, pos, k, "there are no extents for csum range %d-%d", pos, end)
	}
}

// verifyReadMax is the most one read of a copy takes when checking data
// checksums: a sector at a time made a system call per 4 KiB.
const verifyReadMax = 256 << 10

// verifyData reads every sector the ranges cover, on every copy, and
// compares its checksum, on Workers goroutines.
func (c *checker) verifyData(work []csumRange) {
	ss := int(c.sb.SectorSize)
	csize := c.sb.CsumType.Size()
	ch := make(chan csumRange)
	var wg sync.WaitGroup
	for range c.opts.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, verifyReadMax)
			got := make([]byte, 0, csize)
			pbuf := newParityBufs(ss)
			mp := new(chunk.Mapping)
			for r := range ch {
				nsums := len(r.sums) / csize
				for i := 0; i < nsums; {
					if c.ctx.Err() != nil {
						return
					}
					logical := r.start + disk.LogicalAddr(i*ss)
					chk, err := c.m.Lookup(logical)
					if err == nil {
						// As many sectors as one read of every copy takes
						// (MapRange stops at the stripe element); one
						// sector on RAID5/6, whose parity is checked per
						// sector. One mapping per worker, refilled.
						n := min(nsums-i, verifyReadMax/ss)
						if chk.Profile().Parity() > 0 {
							n = 1
						}
						chk.MapRange(logical, uint64(n*ss), mp)
					}
					if err != nil || mp.Length < uint64(ss) {
						c.problemf(KindDataCsum, disk.CsumTreeObjectID, logical, nil, "data at %d is not mapped by any chunk", logical)
						i++
						continue
					}
					k := int(mp.Length) / ss
					var read []byte // the last copy read: on RAID5/6, the data column
					for _, loc := range mp.Copies {
						dev, ok := c.set.Devices()[loc.DevID]
						if !ok {
							continue
						}
						b := buf[:k*ss]
						if n, err := dev.ReadAt(b, int64(loc.Physical)); n != len(b) {
							c.problemf(KindDataCsum, disk.CsumTreeObjectID, logical, nil, "cannot read data at %d (%d bytes) on devid %d physical %d: %v", logical, len(b), loc.DevID, loc.Physical, err)
							continue
						}
						read = b
						for j := range k {
							want := r.sums[(i+j)*csize : (i+j+1)*csize]
							got = c.sb.CsumType.Sum(got[:0], b[j*ss:(j+1)*ss])
							if !bytes.Equal(got, want) {
								at := logical + disk.LogicalAddr(j*ss)
								c.problemf(KindDataCsum, disk.CsumTreeObjectID, at, nil, "mirror %d bytenr %d csum %x expected csum %x", loc.Stripe+1, at, got, want)
							}
						}
					}
					if mp.Chunk.Profile().Parity() > 0 && read != nil {
						c.verifyParity(mp, r.sums[i*csize:(i+1)*csize], read, pbuf)
					}
					i += k
				}
			}
		}()
	}
	for _, r := range work {
		ch <- r
	}
	close(ch)
	wg.Wait()
}

// parityBufs are one worker's buffers for verifyParity: the row's
// columns, the parity read and the parity recomputed, a sector each.
type parityBufs struct {
	cols         [][]byte
	p, q, cp, cq []byte
	sum          []byte
}

func newParityBufs(ss int) *parityBufs {
	return &parityBufs{p: make([]byte, ss), q: make([]byte, ss), cp: make([]byte, ss), cq: make([]byte, ss)}
}

// verifyParity checks a RAID5/6 data sector's second and third mirror,
// the copies the kernel rebuilds from parity when the data column fails:
// the sector rebuilt from P and the other columns must have the
// checksum (mirror 2), and Q must equal what the columns give (mirror 3,
// RAID6). A device that is absent is skipped, as for the copies. data is
// the sector of the data column (mp.Column), read already.
func (c *checker) verifyParity(mp *chunk.Mapping, want, data []byte, b *parityBufs) {
	ss := len(b.p)
	devs := c.set.Devices()
	read := func(loc chunk.Location, dst []byte) bool {
		dev, ok := devs[loc.DevID]
		if !ok {
			return false
		}
		if n, err := dev.ReadAt(dst, int64(loc.Physical)); n != ss {
			c.problemf(KindDataCsum, disk.CsumTreeObjectID, mp.Logical, nil, "cannot read parity of data at %d on devid %d physical %d: %v", mp.Logical, loc.DevID, loc.Physical, err)
			return false
		}
		return true
	}
	for len(b.cols) < len(mp.Data) {
		b.cols = append(b.cols, make([]byte, ss))
	}
	cols := b.cols[:len(mp.Data)]
	for j, loc := range mp.Data {
		if j == mp.Column {
			copy(cols[j], data)
			continue
		}
		if !read(loc, cols[j]) {
			return
		}
	}
	if !read(mp.P, b.p) {
		return
	}
	raid6 := mp.Q.Stripe >= 0
	var cq []byte
	if raid6 {
		if !read(mp.Q, b.q) {
			return
		}
		cq = b.cq
	}
	chunk.Parity(b.cp, cq, cols)
	// The column rebuilt from P is the column xor (P read xor P computed).
	rebuilt := cols[mp.Column]
	for i := range rebuilt {
		rebuilt[i] ^= b.p[i] ^ b.cp[i]
	}
	b.sum = c.sb.CsumType.Sum(b.sum[:0], rebuilt)
	if !bytes.Equal(b.sum, want) {
		c.problemf(KindDataCsum, disk.CsumTreeObjectID, mp.Logical, nil, "mirror 2 bytenr %d csum %x expected csum %x (rebuilt from P on devid %d)", mp.Logical, b.sum, want, mp.P.DevID)
	}
	if raid6 && !bytes.Equal(b.q, cq) {
		c.problemf(KindDataCsum, disk.CsumTreeObjectID, mp.Logical, nil, "mirror 3 bytenr %d: Q on devid %d physical %d does not match the row's data", mp.Logical, mp.Q.DevID, mp.Q.Physical)
	}
}
