package txn

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/gobtrfs/btrfs/internal/btrfstest"
	"github.com/gobtrfs/btrfs/internal/disk"
)

// v1Header encodes a btrfs_free_space_header naming loc.
func v1Header(loc disk.Key) []byte {
	b := make([]byte, freeSpaceHeaderSize)
	loc.Encode(b)
	binary.LittleEndian.PutUint64(b[disk.KeySize:], 7)
	return b
}

// TestLoadSpaceCacheV1 gathers the v1 cache items written into the root
// tree of an image (with a free-space tree, so nothing converts them on
// commit; loadSpaceCacheV1 is called directly), and refuses headers and
// cache inodes it cannot remove safely.
func TestLoadSpaceCacheV1(t *testing.T) {
	fe := disk.FileExtentItem{Generation: 5, RAMBytes: 65536, Type: disk.FileExtentPrealloc,
		DiskBytenr: 1 << 24, DiskNumBytes: 65536, NumBytes: 65536}
	feb := make([]byte, fe.Size())
	fe.Encode(feb)
	ino := make([]byte, 160)
	header := disk.Key{ObjectID: disk.FreeSpaceObjectID, Offset: 1 << 22}
	orphan := disk.Key{ObjectID: disk.OrphanObjectID, Type: disk.OrphanItemKey, Offset: 300}
	inoKey := disk.Key{ObjectID: 300, Type: disk.InodeItemKey}
	extKey := disk.Key{ObjectID: 300, Type: disk.ExtentDataKey, Offset: 4096}
	type item struct {
		k disk.Key
		v []byte
	}
	header2 := disk.Key{ObjectID: disk.FreeSpaceObjectID, Offset: 1 << 23}
	bad := fe
	bad.Offset = 8192 // past the item's file offset 4096
	badb := make([]byte, bad.Size())
	bad.Encode(badb)
	cases := []struct {
		name  string
		items []item
		want  error // nil: gathered
		keys  []disk.Key
	}{
		{"cache file", []item{{header, v1Header(inoKey)}, {inoKey, ino}, {extKey, feb}, {orphan, nil}}, nil,
			[]disk.Key{header, inoKey, extKey, orphan}},
		{"two headers naming one inode", []item{{header, v1Header(inoKey)}, {header2, v1Header(inoKey)}, {inoKey, ino}, {extKey, feb}}, nil,
			[]disk.Key{header, header2, inoKey, extKey}},
		{"extent offset past the file offset", []item{{header, v1Header(inoKey)}, {inoKey, ino}, {extKey, badb}}, disk.ErrCorrupt, nil},
		{"location not an inode", []item{{header, v1Header(disk.Key{ObjectID: 300, Type: disk.DirItemKey})}}, disk.ErrCorrupt, nil},
		{"location a tree id", []item{{header, v1Header(disk.Key{ObjectID: 5, Type: disk.InodeItemKey})}}, disk.ErrCorrupt, nil},
		{"short header", []item{{header, make([]byte, 10)}}, disk.ErrCorrupt, nil},
		{"typed header", []item{{disk.Key{ObjectID: disk.FreeSpaceObjectID, Type: disk.InodeItemKey}, ino}}, disk.ErrCorrupt, nil},
		{"named cache inode", []item{{header, v1Header(inoKey)}, {inoKey, ino},
			{disk.Key{ObjectID: 300, Type: disk.InodeRefKey, Offset: 256}, []byte{1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 'x'}}}, ErrUnsupported, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{})
			fs, err := Open([]string{img})
			if err != nil {
				t.Fatal(err)
			}
			defer fs.Close()
			tx, err := fs.Begin()
			if err != nil {
				t.Fatal(err)
			}
			rt, err := tx.Tree(disk.RootTreeObjectID)
			if err != nil {
				t.Fatal(err)
			}
			for _, it := range c.items {
				if err := rt.InsertItem(tx.Trans(), it.k, it.v); err != nil {
					t.Fatal(err)
				}
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			v, err := fs.loadSpaceCacheV1()
			if c.want != nil {
				if !errors.Is(err, c.want) {
					t.Fatalf("got %v, want %v", err, c.want)
				}
				t.Logf("refused: %v", err)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			wantKeys := c.keys
			if len(v.keys) != len(wantKeys) {
				t.Fatalf("keys %v, want %v", v.keys, wantKeys)
			}
			for i, k := range wantKeys {
				if v.keys[i] != k {
					t.Fatalf("keys %v, want %v", v.keys, wantKeys)
				}
			}
			wantRef := v1Ref{bytenr: 1 << 24, numBytes: 65536, ino: 300, offset: 4096}
			if len(v.refs) != 1 || v.refs[0] != wantRef {
				t.Fatalf("refs %+v, want %+v", v.refs, wantRef)
			}
		})
	}
}
