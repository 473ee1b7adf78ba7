package check

import (
	"bytes"
	"encoding/binary"

	"github.com/gobtrfs/btrfs/internal/disk"
)

// The names of an fs tree (INODE_REF/EXTREF in the child, DIR_ITEM and
// DIR_INDEX in the parent) are streamed, not kept
// (docs/design/0024-check-memory.md): each adds a record keyed by (child,
// parent, name, walk order) to the tree's sorter, and finish reads them
// back grouped by name, in the order it reports them.

// Name record kinds.
const (
	nameRef byte = iota
	nameDirItem
	nameDirIndex
)

// appendName encodes name so that byte order of the encodings is string
// order and no encoding is a prefix of another: 0x00 is escaped as 0x00
// 0xff and the name ends with 0x00 0x01.
func appendName(b, name []byte) []byte {
	for _, ch := range name {
		if ch == 0 {
			b = append(b, 0, 0xff)
		} else {
			b = append(b, ch)
		}
	}
	return append(b, 0, 1)
}

// splitName decodes appendName's encoding at the front of b and returns
// the name and the rest. The name is a view of b unless it holds 0x00.
func splitName(b []byte) (name, rest []byte) {
	for i := 0; i+1 < len(b); i++ {
		if b[i] == 0 {
			if b[i+1] == 1 {
				return b[:i:i], b[i+2:]
			}
			return splitEscaped(b)
		}
	}
	return splitEscaped(b)
}

// splitEscaped is splitName for a name holding escaped 0x00 bytes.
func splitEscaped(b []byte) (name, rest []byte) {
	for i := 0; i+1 < len(b); i++ {
		if b[i] != 0 {
			name = append(name, b[i])
			continue
		}
		if b[i+1] == 1 {
			return name, b[i+2:]
		}
		name = append(name, 0)
		i++
	}
	return name, nil
}

func (f *fsTree) addName(parent, child disk.ObjectID, name []byte, kind byte, index uint64, ftype disk.FileType) {
	be := binary.BigEndian
	var stack [128]byte
	b := stack[:0]
	b = be.AppendUint64(b, uint64(child))
	b = be.AppendUint64(b, uint64(parent))
	b = appendName(b, name)
	b = be.AppendUint64(b, f.nameSeq)
	f.nameSeq++
	b = append(b, kind)
	b = be.AppendUint64(b, index)
	b = append(b, byte(ftype))
	f.names.Add(b)
}

// nameCursor reads a tree's names back, one name at a time.
type nameCursor struct {
	it   *mergeIter
	next []byte
	ok   bool
}

func newNameCursor(it *mergeIter) *nameCursor {
	nc := &nameCursor{it: it}
	nc.next, nc.ok = nc.it.Next()
	return nc
}

// name returns the next name's key and what its records say, or false at
// the end. Records of one name come in walk order; a later one of a kind
// overrides an earlier one, as a map updated in walk order would.
func (nc *nameCursor) name() (nameKey, nameRec, bool) {
	if !nc.ok {
		return nameKey{}, nameRec{}, false
	}
	be := binary.BigEndian
	// The records of one name share their encoded (child, parent, name)
	// prefix: compare that, and decode the key once.
	first := nc.next
	name, rest := splitName(first[16:])
	prefix := first[:len(first)-len(rest)]
	k := nameKey{parent: disk.ObjectID(be.Uint64(first[8:])), child: disk.ObjectID(be.Uint64(first)), name: string(name)}
	var n nameRec
	for nc.ok {
		b := nc.next
		if len(b) < len(prefix) || !bytes.Equal(b[:len(prefix)], prefix) {
			break
		}
		if rest := b[len(prefix):]; len(rest) >= 8+1+8+1 {
			kind, index, ftype := rest[8], be.Uint64(rest[9:]), disk.FileType(rest[17])
			switch kind {
			case nameRef:
				n.ref, n.refIndex = true, index
			case nameDirItem:
				n.dirItem = true
				n.ftype, n.hasType = ftype, true
			case nameDirIndex:
				n.dirIndex, n.index = true, index
				n.ftype, n.hasType = ftype, true
			}
		}
		nc.next, nc.ok = nc.it.Next()
	}
	return k, n, true
}

// addDirIndexName records that DIR_INDEX k of directory dir holds name;
// finish reports a name given twice in one directory (dupNames).
func (f *fsTree) addDirIndexName(dir disk.ObjectID, name []byte, k disk.Key) {
	be := binary.BigEndian
	var stack [128]byte
	b := stack[:0]
	b = be.AppendUint64(b, uint64(dir))
	b = appendName(b, name)
	b = be.AppendUint64(b, f.nameSeq)
	f.nameSeq++
	b = be.AppendUint64(b, uint64(k.ObjectID))
	b = append(b, byte(k.Type))
	b = be.AppendUint64(b, k.Offset)
	f.dirIndexNames.Add(b)
}

// dupNames reports every DIR_INDEX after the first that gives a
// directory a name it already has, in (directory, name, walk) order.
func (f *fsTree) dupNames() error {
	be := binary.BigEndian
	it := mergeAll(f.allSorters(f.dirSorters, f.dirIndexNames)...)
	var prevDir disk.ObjectID
	var prevName []byte
	first := true
	for b, ok := it.Next(); ok; b, ok = it.Next() {
		dir := disk.ObjectID(be.Uint64(b))
		name, rest := splitName(b[8:])
		if len(rest) < 8+17 {
			continue
		}
		if !first && dir == prevDir && string(name) == string(prevName) {
			k := disk.Key{ObjectID: disk.ObjectID(be.Uint64(rest[8:])), Type: disk.KeyType(rest[16]), Offset: be.Uint64(rest[17:])}
			f.emit(KindDirItem, f.t.id, 0, &k, "root %d inode %d errors: dup filename %q", f.t.id, dir, name)
		}
		first, prevDir, prevName = false, dir, name
	}
	return it.Err()
}

// viewDirItems is disk.ParseDirItems without the copies: the entries'
// names are views of b, valid while b is, and the entries reuse buf. The
// fs-tree pass parses a million names; their copies were a tenth of its
// time. Errors are disk.ParseDirItems's own.
func viewDirItems(b []byte, buf []disk.DirItem) ([]disk.DirItem, error) {
	le := binary.LittleEndian
	items := buf[:0]
	for off := 0; off < len(b); {
		if len(b)-off < disk.DirItemBaseSize {
			return disk.ParseDirItems(b)
		}
		p := b[off:]
		dataLen := int(le.Uint16(p[0x19:]))
		nameLen := int(le.Uint16(p[0x1b:]))
		end := off + disk.DirItemBaseSize + nameLen + dataLen
		if end > len(b) {
			return disk.ParseDirItems(b)
		}
		nameEnd := off + disk.DirItemBaseSize + nameLen
		items = append(items, disk.DirItem{Location: disk.KeyAt(p), TransID: disk.Generation(le.Uint64(p[0x11:])),
			Type: disk.FileType(p[0x1d]), Name: b[off+disk.DirItemBaseSize : nameEnd : nameEnd]})
		off = end
	}
	return items, nil
}

// viewInodeRefs is disk.ParseInodeRefs without the copies (see
// viewDirItems).
func viewInodeRefs(b []byte, buf []disk.InodeRef) ([]disk.InodeRef, error) {
	le := binary.LittleEndian
	refs := buf[:0]
	for off := 0; off < len(b); {
		if len(b)-off < disk.InodeRefBaseSize {
			return disk.ParseInodeRefs(b)
		}
		n := int(le.Uint16(b[off+8:]))
		end := off + disk.InodeRefBaseSize + n
		if end > len(b) {
			return disk.ParseInodeRefs(b)
		}
		refs = append(refs, disk.InodeRef{Index: le.Uint64(b[off:]), Name: b[off+disk.InodeRefBaseSize : end : end]})
		off = end
	}
	return refs, nil
}

// allSorters returns joined (the sorters of all the segments finishTree
// joined), or own when the tree was not joined.
func (f *fsTree) allSorters(joined []*sorter, own *sorter) []*sorter {
	if joined != nil {
		return joined
	}
	return []*sorter{own}
}
