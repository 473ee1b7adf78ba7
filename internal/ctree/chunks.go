package ctree

import (
	"github.com/gobtrfs/btrfs/internal/chunk"
	"github.com/gobtrfs/btrfs/internal/disk"
)

// LoadChunkTree adds every CHUNK_ITEM of the chunk tree at root to m: the
// second step of every bootstrap, after the superblock's system chunks,
// which already map the chunk tree's own blocks. An undecodable or
// conflicting item is corruption naming its block and key.
func LoadChunkTree(r Reader, root Root, m *chunk.Map) error {
	return Walk(r, root, func(n disk.Node, _ int) error {
		for i := 0; n.IsLeaf() && i < n.NumItems(); i++ {
			k := n.Key(i)
			if k.Type != disk.ChunkItemKey {
				continue
			}
			var ci disk.ChunkItem
			err := ci.Decode(n.ItemData(i))
			if err == nil {
				err = m.Add(disk.LogicalAddr(k.Offset), &ci)
			}
			if err != nil {
				return &disk.CorruptError{Logical: n.Bytenr(), Tree: disk.ChunkTreeObjectID, Key: &k, What: "chunk item", Err: err}
			}
		}
		return nil
	})
}
