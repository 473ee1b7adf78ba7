package disk

import (
	"bytes"
	"fmt"
	"sort"
	"strings"
	"testing"
)

// TestGoldenMkfsImage decodes every item of an mkfs.btrfs --rootdir image
// and compares it with dump-tree's rendering of the same item.
func TestGoldenMkfsImage(t *testing.T) {
	img := buildMkfsImage(t)
	cov := compareWithDumpTree(t, img)
	requireCoverage(t, cov, "INODE_ITEM", "INODE_REF", "DIR_ITEM", "DIR_INDEX", "EXTENT_DATA inline",
		"EXTENT_DATA regular", "EXTENT_CSUM", "ROOT_ITEM", "METADATA_ITEM", "EXTENT_ITEM", "BLOCK_GROUP_ITEM",
		"FREE_SPACE_INFO", "FREE_SPACE_EXTENT", "DEV_EXTENT", "DEV_ITEM", "CHUNK_ITEM", "UUID_KEY_SUBVOL",
		"inline TREE_BLOCK_REF", "inline EXTENT_DATA_REF")
}

// TestGoldenKernelImage does the same for an image the kernel wrote.
func TestGoldenKernelImage(t *testing.T) {
	img := buildKernelImage(t)
	cov := compareWithDumpTree(t, img)
	requireCoverage(t, cov, "INODE_ITEM", "INODE_REF", "INODE_EXTREF", "XATTR_ITEM", "DIR_ITEM", "DIR_INDEX",
		"EXTENT_DATA inline", "EXTENT_DATA inline compressed", "EXTENT_DATA regular", "EXTENT_DATA regular compressed",
		"EXTENT_DATA prealloc", "EXTENT_CSUM", "ROOT_ITEM", "snapshot root", "ROOT_REF", "ROOT_BACKREF",
		"METADATA_ITEM", "EXTENT_ITEM", "FULL_BACKREF", "inline TREE_BLOCK_REF", "inline SHARED_DATA_REF",
		"inline EXTENT_DATA_REF", "several data refs", "several inode refs", "subvolume entry",
		"BLOCK_GROUP_ITEM", "FREE_SPACE_INFO", "DEV_EXTENT", "DEV_ITEM", "CHUNK_ITEM", "UUID_KEY_SUBVOL",
		"PERSISTENT_ITEM", "QGROUP_STATUS", "QGROUP_INFO", "QGROUP_LIMIT", "NODATASUM inode", "APPEND inode",
		"setuid inode")
}

func requireCoverage(t *testing.T, cov map[string]int, labels ...string) {
	t.Helper()
	var seen []string
	for l, n := range cov {
		seen = append(seen, fmt.Sprintf("%s:%d", l, n))
	}
	sort.Strings(seen)
	t.Logf("items compared: %s", strings.Join(seen, ", "))
	for _, l := range labels {
		if cov[l] == 0 {
			t.Errorf("no %s item was compared", l)
		}
	}
}

// compareWithDumpTree checks every leaf of img: CheckLeafItems accepts it,
// its items sit where dump-tree says, each decodes, re-encodes to the same
// bytes and prints as dump-tree printed it. It returns counts of what was
// compared.
func compareWithDumpTree(t *testing.T, img string) map[string]int {
	im := openTestImage(t, img)
	dump := parseDumpTree(runCmd(t, "btrfs", "inspect-internal", "dump-tree", img))
	cov := map[string]int{}
	rootUUIDs := map[ObjectID]UUID{}
	uuidRefs := map[UUID][]ObjectID{}
	for addr, leaf := range im.leaves {
		items, ok := dump[addr]
		if !ok {
			t.Errorf("leaf %d (tree %s) not in dump-tree output", addr, leaf.tree.TreeName())
			continue
		}
		n := leaf.n
		if len(items) != n.NumItems() {
			t.Errorf("leaf %d: %d items, dump-tree shows %d", addr, n.NumItems(), len(items))
			continue
		}
		if err := CheckLeafItems(n, im.itemParams(leaf.tree)); err != nil {
			t.Errorf("leaf %d (tree %s) fails the item checks: %v", addr, leaf.tree.TreeName(), err)
		}
		for i := range n.NumItems() {
			p := compareItem(t, im, n, i, &items[i])
			if p == nil {
				continue
			}
			for _, l := range coverageLabels(n.Key(i), p) {
				cov[l]++
			}
			switch v := p.(type) {
			case *RootItem:
				rootUUIDs[n.Key(i).ObjectID] = v.UUID
			case *UUIDItem:
				uuidRefs[UUIDOfKey(n.Key(i))] = *v
			}
		}
	}
	for u, ids := range uuidRefs {
		for _, id := range ids {
			if rootUUIDs[id] != u {
				t.Errorf("uuid tree maps %s to subvolume %d, whose root item has uuid %s", u, id, rootUUIDs[id])
			}
		}
	}
	return cov
}

// compareItem checks item i of n against dump-tree's d and returns the
// decoded payload, or nil after reporting a failure.
func compareItem(t *testing.T, im *testImage, n Node, i int, d *dumpItem) Payload {
	t.Helper()
	it, data := n.ItemHeader(i), n.ItemData(i)
	k := it.Key
	where := fmt.Sprintf("leaf %d item %d key %v", n.Bytenr(), i, k)
	if d.key != progsKey(k) || d.itemoff != int(it.Offset) || d.size != int(it.Size) {
		t.Errorf("%s: key (%s) itemoff %d itemsize %d, dump-tree says (%s) %d %d",
			where, progsKey(k), it.Offset, it.Size, d.key, d.itemoff, d.size)
		return nil
	}
	p, err := DecodeItem(k, data)
	if err != nil {
		t.Errorf("%s: decode: %v", where, err)
		return nil
	}
	if out := EncodePayload(p); !bytes.Equal(out, data) {
		t.Errorf("%s: re-encoding differs:\n got %x\nwant %x", where, out, data)
		return nil
	}
	if missing := d.missingLines(progsLines(k, p, im.sb.SectorSize, im.sb.CsumType.Size())); len(missing) > 0 {
		t.Errorf("%s: decoded item prints lines dump-tree lacks:\n  %s\ndump-tree printed:\n  %s",
			where, strings.Join(missing, "\n  "), strings.Join(d.lines, "\n  "))
		return nil
	}
	return p
}

// coverageLabels names what an item exercises, so the tests can insist the
// images contain every interesting shape.
func coverageLabels(k Key, p Payload) []string {
	labels := []string{k.Type.String()}
	switch v := p.(type) {
	case *FileExtentItem:
		l := "EXTENT_DATA " + v.Type.String()
		labels = append(labels, l)
		if v.Compression != CompressNone {
			labels = append(labels, l+" compressed")
		}
	case *ExtentItem:
		if v.Flags&ExtentFlagFullBackref != 0 {
			labels = append(labels, "FULL_BACKREF")
		}
		data := 0
		for _, r := range v.InlineRefs {
			labels = append(labels, "inline "+r.Type.String())
			if r.Type == ExtentDataRefKey {
				data++
			}
		}
		if data > 1 {
			labels = append(labels, "several data refs")
		}
	case *InodeRefs:
		if len(*v) > 1 {
			labels = append(labels, "several inode refs")
		}
	case *DirItems:
		for _, d := range *v {
			if d.Location.Type == RootItemKey {
				labels = append(labels, "subvolume entry")
			}
		}
	case *RootItem:
		if !v.ParentUUID.IsZero() {
			labels = append(labels, "snapshot root")
		}
	case *InodeItem:
		if v.Flags&InodeNoDataSum != 0 {
			labels = append(labels, "NODATASUM inode")
		}
		if v.Flags&InodeAppend != 0 {
			labels = append(labels, "APPEND inode")
		}
		if v.Mode&ModeSetUID != 0 && v.UID != v.GID {
			labels = append(labels, "setuid inode")
		}
	}
	return labels
}
