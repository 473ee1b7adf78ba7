package check

import (
	"sort"

	"github.com/gobtrfs/btrfs/internal/disk"
)

// checkQuota recomputes every qgroup's referenced and exclusive bytes from
// the extents and the subvolumes that reach them, and compares them with
// the quota tree's info items. A quota tree marked inconsistent or being
// rescanned is not compared: its counts are known to be stale.
func (c *checker) checkQuota() error {
	t, _ := c.tree(disk.QuotaTreeObjectID)
	var status disk.QgroupStatusItem
	haveStatus := false
	infos := map[disk.QgroupID]disk.QgroupInfoItem{}
	parents := map[disk.QgroupID][]disk.QgroupID{} // child -> parents
	c.forEachItem(t, func(k disk.Key, data []byte, leaf disk.Node) error {
		kk := k
		switch k.Type {
		case disk.QgroupStatusKey:
			if err := status.Decode(data); err != nil {
				c.problemf(KindItem, disk.QuotaTreeObjectID, leaf.Bytenr(), &kk, "qgroup status item: %v", err)
				return nil
			}
			haveStatus = true
		case disk.QgroupInfoKey:
			var qi disk.QgroupInfoItem
			if err := qi.Decode(data); err != nil {
				c.problemf(KindItem, disk.QuotaTreeObjectID, leaf.Bytenr(), &kk, "qgroup info item: %v", err)
				return nil
			}
			infos[disk.QgroupID(k.Offset)] = qi
		case disk.QgroupRelationKey:
			a, b := disk.QgroupID(k.ObjectID), disk.QgroupID(k.Offset)
			if a.Level() < b.Level() {
				parents[a] = append(parents[a], b)
			}
		}
		return nil
	})
	if !haveStatus {
		c.problemf(KindQuota, disk.QuotaTreeObjectID, 0, nil, "quota tree has no status item")
		return nil
	}
	if status.Flags&disk.QgroupStatusOn == 0 || status.Flags&(disk.QgroupStatusInconsistent|disk.QgroupStatusRescan|disk.QgroupStatusSimpleMode) != 0 {
		return nil
	}
	// up[q] is q and every qgroup above it. An extent counts as
	// referenced for every qgroup above any subvolume reaching it, and as
	// exclusive for those above all of them.
	up := map[disk.QgroupID][]disk.QgroupID{}
	var ancestors func(q disk.QgroupID) []disk.QgroupID
	ancestors = func(q disk.QgroupID) []disk.QgroupID {
		if a, ok := up[q]; ok {
			return a
		}
		up[q] = []disk.QgroupID{q} // a relation cycle ends here
		set := map[disk.QgroupID]bool{q: true}
		for _, p := range parents[q] {
			if p.Level() <= q.Level() {
				continue
			}
			for _, a := range ancestors(p) {
				set[a] = true
			}
		}
		out := make([]disk.QgroupID, 0, len(set))
		for a := range set {
			out = append(out, a)
		}
		up[q] = out
		return out
	}
	type counts struct{ rfer, excl uint64 }
	got := map[disk.QgroupID]*counts{}
	for q := range infos {
		got[q] = &counts{}
	}
	memo := map[disk.LogicalAddr][]disk.ObjectID{}
	hits := map[disk.QgroupID]int{}
	join := &dataJoin{cur: c.newDataCursor(false)}
	for _, e := range c.extents {
		var roots []disk.ObjectID
		if e.meta {
			roots = c.rootsOf(e.start, memo, 0)
		} else if d := join.at(c, e.start); d != nil {
			seen := map[disk.LogicalAddr]bool{}
			for _, r := range d.refs {
				if !seen[r.leaf] {
					seen[r.leaf] = true
					roots = unionRoots(roots, c.rootsOf(r.leaf, memo, 0))
				}
			}
		}
		if len(roots) == 0 {
			continue
		}
		clear(hits)
		for _, r := range roots {
			for _, q := range ancestors(disk.MakeQgroupID(0, uint64(r))) {
				hits[q]++
			}
		}
		for q, n := range hits {
			cn := got[q]
			if cn == nil {
				continue
			}
			cn.rfer += e.length
			if n == len(roots) {
				cn.excl += e.length
			}
		}
	}
	if err := join.cur.Err(); err != nil {
		return err
	}
	ids := make([]disk.QgroupID, 0, len(infos))
	for q := range infos {
		ids = append(ids, q)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, q := range ids {
		qi, cn := infos[q], got[q]
		if qi.Rfer != cn.rfer || qi.Excl != cn.excl {
			c.problemf(KindQuota, disk.QuotaTreeObjectID, 0, nil,
				"Counts for qgroup id: %v are different: our referenced %d exclusive %d, disk referenced %d exclusive %d",
				q, cn.rfer, cn.excl, qi.Rfer, qi.Excl)
		}
	}
	return nil
}

// rootsOf returns the subvolumes (fs trees) that reach tree block addr,
// sorted: its own root references and, through its parents, theirs.
func (c *checker) rootsOf(addr disk.LogicalAddr, memo map[disk.LogicalAddr][]disk.ObjectID, depth int) []disk.ObjectID {
	if r, ok := memo[addr]; ok {
		return r
	}
	rec := c.blocks[addr]
	if rec == nil || depth > disk.MaxLevel+1 {
		return nil
	}
	memo[addr] = nil // a damaged image may loop: stop there
	var out []disk.ObjectID
	for _, id := range rec.roots {
		if id.IsFSTree() {
			out = unionRoots(out, []disk.ObjectID{id})
		}
	}
	for _, p := range rec.parents {
		out = unionRoots(out, c.rootsOf(p, memo, depth+1))
	}
	memo[addr] = out
	return out
}

// unionRoots merges two sorted id lists.
func unionRoots(a, b []disk.ObjectID) []disk.ObjectID {
	out := make([]disk.ObjectID, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j == len(b) || (i < len(a) && a[i] < b[j]):
			out = append(out, a[i])
			i++
		case i == len(a) || b[j] < a[i]:
			out = append(out, b[j])
			j++
		default:
			out = append(out, a[i])
			i, j = i+1, j+1
		}
	}
	return out
}
