package dump

import (
	"fmt"
	"io"

	"github.com/gobtrfs/btrfs/internal/disk"
)

// SuperJSON writes one superblock copy as a JSON line: where it was read,
// whether checksum and magic match, and every field (sys_chunk_array and
// backup roots included).
func SuperJSON(w io.Writer, sb *disk.Superblock, raw []byte, bytenr uint64, device string) error {
	if len(raw) < disk.SuperblockSize {
		raw = make([]byte, disk.SuperblockSize)
		sb.Encode(raw)
	}
	o := obj{{"bytenr_read", bytenr}, {"device", device}, {"csum_type", uint16(sb.CsumType)}}
	if sb.CsumType.Valid() {
		o = o.add("csum_type_name", csumNames[sb.CsumType]).add("csum", fmt.Sprintf("%x", raw[:sb.CsumType.Size()])).
			add("csum_match", sb.CsumType.VerifyBlock(raw[:disk.SuperblockSize]))
	}
	o = append(o, superFieldsJSON(sb)...)
	sys := []obj{}
	chunks, err := sb.SysChunks()
	for _, c := range chunks {
		sys = append(sys, obj{{"key", keyJSON(c.Key)}, {"chunk", chunkObj(&c.Chunk)}})
	}
	o = o.add("sys_chunks", sys)
	if err != nil {
		o = o.add("sys_chunks_error", err.Error())
	}
	backups := make([]obj, len(sb.BackupRoots))
	for i, b := range sb.BackupRoots {
		backups[i] = backupJSON(&b)
	}
	return writeJSONLine(w, o.add("backup_roots", backups))
}

func superFieldsJSON(sb *disk.Superblock) obj {
	return obj{{"bytenr", uint64(sb.Bytenr)}, {"flags", sb.Flags}, {"magic", fmt.Sprintf("0x%016x", sb.Magic)},
		{"magic_match", sb.Magic == disk.Magic}, {"fsid", sb.FSID.String()}, {"metadata_uuid", sb.MetadataUUID.String()},
		{"label", sb.LabelString()}, {"generation", uint64(sb.Generation)}, {"root", uint64(sb.Root)},
		{"sys_array_size", sb.SysChunkArraySize}, {"chunk_root_generation", uint64(sb.ChunkRootGeneration)},
		{"root_level", sb.RootLevel}, {"chunk_root", uint64(sb.ChunkRoot)}, {"chunk_root_level", sb.ChunkRootLevel},
		{"log_root", uint64(sb.LogRoot)}, {"log_root_transid", sb.LogRootTransID}, {"log_root_level", sb.LogRootLevel},
		{"total_bytes", sb.TotalBytes}, {"bytes_used", sb.BytesUsed}, {"sectorsize", sb.SectorSize},
		{"nodesize", sb.NodeSize}, {"leafsize", sb.LeafSize}, {"stripesize", sb.StripeSize},
		{"root_dir", uint64(sb.RootDirObjectID)}, {"num_devices", sb.NumDevices}, {"compat_flags", sb.CompatFlags},
		{"compat_ro_flags", sb.CompatROFlags}, {"incompat_flags", sb.IncompatFlags},
		{"cache_generation", uint64(sb.CacheGeneration)}, {"uuid_tree_generation", uint64(sb.UUIDTreeGeneration)},
		{"nr_global_roots", sb.NrGlobalRoots}, {"dev_item", devItemObj(&sb.DevItem)}}
}

func backupJSON(b *disk.BackupRoot) obj {
	root := func(addr disk.LogicalAddr, gen disk.Generation, level uint8) obj {
		return obj{{"bytenr", uint64(addr)}, {"generation", uint64(gen)}, {"level", level}}
	}
	return obj{{"tree_root", root(b.TreeRoot, b.TreeRootGen, b.TreeRootLevel)},
		{"chunk_root", root(b.ChunkRoot, b.ChunkRootGen, b.ChunkRootLevel)},
		{"extent_root", root(b.ExtentRoot, b.ExtentRootGen, b.ExtentRootLevel)},
		{"fs_root", root(b.FSRoot, b.FSRootGen, b.FSRootLevel)},
		{"dev_root", root(b.DevRoot, b.DevRootGen, b.DevRootLevel)},
		{"csum_root", root(b.CsumRoot, b.CsumRootGen, b.CsumRootLevel)},
		{"total_bytes", b.TotalBytes}, {"bytes_used", b.BytesUsed}, {"num_devices", b.NumDevices}}
}
