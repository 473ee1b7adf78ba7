package check

import (
	"github.com/gobtrfs/btrfs/internal/disk"
)

// checkUUIDTree compares the UUID tree with the root items: every live
// subvolume's uuid (and received uuid, when set) has its entry naming the
// subvolume, and every entry names a subvolume whose root item carries
// that uuid (an entry naming a subvolume that no longer exists is
// stale, not damage: below). The kernel trusts the tree only when the superblock's
// uuid_tree_generation is the filesystem's generation (otherwise it
// rescans at mount), so only then is it checked.
func (c *checker) checkUUIDTree() error {
	t, ok := c.tree(disk.UUIDTreeObjectID)
	if !ok || c.sb.UUIDTreeGeneration != c.sb.Generation {
		return nil
	}
	type entry struct {
		u disk.UUID
		t disk.KeyType
	}
	have := map[entry]map[disk.ObjectID]bool{}
	err := c.forEachItem(t, func(k disk.Key, data []byte, leaf disk.Node) error {
		if k.Type != disk.UUIDKeySubvol && k.Type != disk.UUIDKeyReceivedSubvol {
			return nil
		}
		var ids disk.UUIDItem
		if ids.Decode(data) != nil {
			return nil // the tree-checker's rules already report it
		}
		u := disk.UUIDOfKey(k)
		e := entry{u, k.Type}
		if have[e] == nil {
			have[e] = map[disk.ObjectID]bool{}
		}
		for _, id := range ids {
			have[e][id] = true
			r, ok := c.tree(id)
			switch {
			case !ok:
				// An entry left by a subvolume that is gone is not
				// damage: the kernel leaves such entries (a deletion
				// racing its rescan of the tree after a mount puts one
				// back), never follows one without looking the root
				// up, and prunes them at its next rescan. Reporting
				// them failed clean kernel-written images.
			case k.Type == disk.UUIDKeySubvol && r.item.UUID != u:
				c.problemf(KindRootRef, disk.UUIDTreeObjectID, leaf.Bytenr(), &k, "uuid tree: %s %s names subvolume %d, whose uuid is %s", k.Type, u, id, r.item.UUID)
			case k.Type == disk.UUIDKeyReceivedSubvol && r.item.ReceivedUUID != u:
				c.problemf(KindRootRef, disk.UUIDTreeObjectID, leaf.Bytenr(), &k, "uuid tree: %s %s names subvolume %d, whose received uuid is %s", k.Type, u, id, r.item.ReceivedUUID)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, id := range c.sortedTreeIDs() {
		if id < disk.FirstFreeObjectID || id > disk.LastFreeObjectID {
			continue
		}
		r, _ := c.tree(id)
		if r.item.Refs == 0 {
			continue // deleted: its entries went with it
		}
		if r.item.UUID != (disk.UUID{}) && !have[entry{r.item.UUID, disk.UUIDKeySubvol}][id] {
			c.problemf(KindRootRef, disk.UUIDTreeObjectID, 0, nil, "uuid tree: subvolume %d uuid %s has no %s entry", id, r.item.UUID, disk.UUIDKeySubvol)
		}
		if r.item.ReceivedUUID != (disk.UUID{}) && !have[entry{r.item.ReceivedUUID, disk.UUIDKeyReceivedSubvol}][id] {
			c.problemf(KindRootRef, disk.UUIDTreeObjectID, 0, nil, "uuid tree: subvolume %d received uuid %s has no %s entry", id, r.item.ReceivedUUID, disk.UUIDKeyReceivedSubvol)
		}
	}
	return nil
}
