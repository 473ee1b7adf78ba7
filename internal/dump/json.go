package dump

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"io"
	"unicode/utf8"

	"github.com/gobtrfs/btrfs/internal/disk"
)

// obj is a JSON object whose members keep the order they were added in, so
// the output is stable and reads like the text form.
type obj []member

type member struct {
	k string
	v any
}

// add appends a member and returns the object, for chaining.
func (o obj) add(k string, v any) obj { return append(o, member{k, v}) }

// MarshalJSON writes the members in order.
func (o obj) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(m.k)
		b.Write(k)
		b.WriteByte(':')
		v, err := json.Marshal(m.v)
		if err != nil {
			return nil, err
		}
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// writeJSONLine writes v as one line of JSON.
func writeJSONLine(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	_, err = w.Write(b)
	return err
}

func keyJSON(k disk.Key) obj {
	return obj{{"objectid", uint64(k.ObjectID)}, {"type", uint8(k.Type)},
		{"type_name", keyTypeString(uint64(k.ObjectID), k.Type)}, {"offset", k.Offset}}
}

func timeJSON(t disk.Timespec) obj { return obj{{"sec", t.Sec}, {"nsec", t.Nsec}} }

// nameJSON adds a name: "name" as a string, and "name_hex" with the exact
// bytes when they are not valid UTF-8 (JSON strings cannot carry them).
func (p *printer) nameJSON(o obj, key string, b []byte) obj {
	if p.o.HideNames {
		return o.add(key, "HIDDEN")
	}
	o = o.add(key, string(b))
	if !utf8.Valid(b) {
		o = o.add(key+"_hex", hex.EncodeToString(b))
	}
	return o
}

// blockJSON is the JSON object of one tree block (see the package doc).
func (p *printer) blockJSON(n disk.Node) obj {
	h := n.Header()
	flags := h.Flags &^ (0xff << disk.BackrefRevShift)
	o := obj{{"bytenr", uint64(h.Bytenr)}, {"level", h.Level}, {"nritems", h.NumItems}}
	if h.Level == 0 {
		o = o.add("free_space", leafFreeSpace(n))
	} else {
		o = o.add("free_space", disk.MaxKeyPtrs(len(n))-int(h.NumItems))
	}
	o = o.add("generation", uint64(h.Generation)).add("owner", uint64(h.Owner)).
		add("owner_name", ownerString(uint64(h.Owner))).add("flags", flags).
		add("flag_names", headerFlagsString(flags)).add("backref_rev", h.BackrefRev()).
		add("fsid", h.FSID.String()).add("chunk_tree_uuid", h.ChunkTreeUUID.String()).
		add("csum", hex.EncodeToString(h.Csum[:p.o.csumSize()]))
	if h.Level > 0 {
		nr := min(n.NumItems(), (len(n)-disk.HeaderSize)/disk.KeyPtrSize)
		ptrs := make([]obj, nr)
		for i := range ptrs {
			kp := n.KeyPtr(i)
			ptrs[i] = obj{{"key", keyJSON(kp.Key)}, {"blockptr", uint64(kp.BlockPtr)}, {"generation", uint64(kp.Generation)}}
		}
		return o.add("ptrs", ptrs)
	}
	items := []obj{}
	for i := 0; i < n.NumItems() && disk.HeaderSize+disk.ItemSize*(i+1) <= len(n); i++ {
		it := n.ItemHeader(i)
		ij := obj{{"slot", i}, {"key", keyJSON(it.Key)}, {"offset", it.Offset}, {"size", it.Size}}
		start := disk.HeaderSize + int(it.Offset)
		end := start + int(it.Size)
		if start > len(n) || end > len(n) || end < start {
			items = append(items, ij.add("error", "item data outside the block"))
			continue
		}
		items = append(items, p.itemJSON(ij, it.Key, n[start:end]))
	}
	return o.add("items", items)
}

// itemJSON adds the decoded payload of one item: "kind" names the decoder
// used and "data" holds its fields; an item that does not decode gets
// "error" and its bytes in "raw" instead.
func (p *printer) itemJSON(o obj, k disk.Key, b []byte) obj {
	kind, data, err := p.decodeItem(k, b)
	if kind != "" {
		o = o.add("kind", kind)
	}
	if err != nil {
		return o.add("error", err.Error()).add("raw", hex.EncodeToString(b))
	}
	if data == nil {
		if len(b) > 0 && kind == "" {
			o = o.add("raw", hex.EncodeToString(b))
		}
		return o
	}
	return o.add("data", data)
}
