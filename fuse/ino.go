package fuse

import "sync"

// inoMap gives every inode of the filesystem one FUSE inode number.
//
// btrfs numbers inodes per subvolume (each subvolume's root directory is
// 256), and the kernel keeps them apart by giving every subvolume its own
// st_dev. A FUSE mount has one st_dev, so numbers must be made unique
// here: the subvolume shown at the mount point keeps its own numbers
// (what `ls -i` shows there matches the kernel's mount), and inodes of
// other subvolumes get 1<<63 | subvolume<<40 | inode, which is readable
// and cannot meet a number of the shown subvolume (btrfs hands out
// numbers from 256 upwards; none reaches 2^63). The rare inode that does
// not fit (a subvolume id of 2^23 or more, an inode number of 2^40 or
// more) gets a number from a table, counted down from 2^63-3 (the two
// above are the control directory's), kept for the life of the mount.
type inoMap struct {
	root uint64 // the subvolume shown at the mount point; immutable

	mu   sync.Mutex
	far  map[[2]uint64]uint64 // protected by mu
	next uint64               // protected by mu
}

const (
	inoSubvolFlag = 1 << 63
	inoSubvolBits = 23
	inoBits       = 40
)

// ino returns the FUSE inode number of inode ino of subvolume subvol.
func (m *inoMap) ino(subvol, ino uint64) uint64 {
	if subvol == m.root {
		return ino
	}
	if subvol < 1<<inoSubvolBits && ino < 1<<inoBits {
		return inoSubvolFlag | subvol<<inoBits | ino
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	k := [2]uint64{subvol, ino}
	if n, ok := m.far[k]; ok {
		return n
	}
	if m.far == nil {
		m.far = map[[2]uint64]uint64{}
		m.next = inoSubvolFlag - 3
	}
	n := m.next
	m.next--
	m.far[k] = n
	return n
}
