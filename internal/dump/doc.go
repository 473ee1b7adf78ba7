// Package dump prints btrfs superblocks and tree blocks in the text form
// of btrfs-progs 6.2 (`btrfs inspect-internal dump-super` and `dump-tree`),
// byte for byte, and in a JSON form meant for scripts.
//
// # Text form
//
// Super prints a superblock, Block one tree block, and All, Tree and
// Blocks walk the filesystem like dump-tree without options, with -t, and
// with -b. The text is a fact of progs' interface: every rule here (how
// object ids, key offsets and flag words are named, which lines an item
// gets, what is printed for damaged or unknown items) was read off the
// tool's output and is checked against it by the tests, which compare the
// whole output on images made by mkfs.btrfs and by the kernel, and on
// crafted blocks holding every item type with damaged sizes and odd values.
//
// Like progs, the printers read an item's fields at their offsets from the
// item start even when the item is too short, so they show the bytes that
// follow it in the block (see view); unlike progs they never read outside
// the block, and print zeros where progs would print whatever memory
// follows its buffer. Dates are printed in BlockOptions.Location (the
// local zone by default, like progs).
//
// # JSON form
//
// With TreeOptions.JSON the tree printers write JSON lines, one object per
// line, each with a "record" member saying what it is:
//
//	{"record":"tree", "name":"fs", "tree_id":5, "key":KEY, "bytenr":N, "level":N}
//	    introduces the blocks of one tree; name is the label of the text
//	    form ("root", "chunk", "log root", "extent", "fs", "file", ...);
//	    key is the ROOT_ITEM key and is absent for the trees the superblock
//	    points to (root, chunk, log root). With Roots only these records
//	    are written.
//	{"record":"block", BLOCK...}
//	    one tree block, in the order the text form prints them.
//	{"record":"backup_roots", "roots":[BACKUP...]}   (with Backups)
//	{"record":"totals", "total_bytes":N, "bytes_used":N, "fsid":"UUID"}
//
// BlockJSON writes a single BLOCK object (without "record"):
//
//	"bytenr", "level", "nritems", "free_space", "generation", "owner"
//	(number) and "owner_name" (as in the text), "flags" (without the
//	backref revision byte), "flag_names" ("WRITTEN|RELOC"), "backref_rev",
//	"fsid", "chunk_tree_uuid", "csum" (hex, checksum-size bytes); then
//	for a node "ptrs": [{"key":KEY, "blockptr":N, "generation":N}], for a
//	leaf "items": [ITEM].
//
// KEY is {"objectid":N, "type":N, "type_name":"INODE_ITEM", "offset":N}.
//
// ITEM is {"slot":N, "key":KEY, "offset":N, "size":N} (offset and size
// as in the item header) plus, when the type has a decoder, "kind" and
// "data" (its fields, below). An item its decoder rejects (too short,
// entries overrunning it) has "error" (a message) and "raw" (its bytes in
// hex) instead of "data"; an item of a type without a decoder has only
// "raw" (if not empty). Kinds and their data members:
//
//	inode_item       generation transid size nbytes block_group mode nlink uid
//	                 gid rdev sequence flags flag_names atime ctime mtime otime
//	                 (times are {"sec":N,"nsec":N})
//	inode_ref        refs: [{index, name}]
//	inode_extref     refs: [{parent, index, name}]
//	dir_item         entries: [{location:KEY, type, type_name, transid, name,
//	                 data_hex}] (DIR_ITEM, DIR_INDEX and XATTR_ITEM)
//	dir_log          end
//	file_extent      generation type type_name ram_bytes compression
//	                 compression_name encryption other_encoding, then
//	                 inline_size for inline extents, or disk_bytenr
//	                 disk_num_bytes offset num_bytes
//	root_item        inode (as inode_item) generation root_dirid bytenr
//	                 byte_limit bytes_used last_snapshot flags refs
//	                 drop_progress:KEY drop_level level legacy, and unless
//	                 legacy: generation_v2 uuid parent_uuid received_uuid
//	                 ctransid otransid stransid rtransid ctime otime stime rtime
//	root_ref         dirid sequence name (ROOT_REF and ROOT_BACKREF)
//	extent_item      refs generation flags flag_names, level (METADATA_ITEM)
//	                 or tree_block:{key, level} (EXTENT_ITEM of a tree block),
//	                 inline_refs: [{type, type_name, and root | parent |
//	                 root objectid offset count | parent count}]
//	extent_data_ref  refs: [{root, objectid, offset, count}]
//	shared_data_ref  count
//	empty            (no data: ORPHAN_ITEM, keyed TREE_BLOCK_REF and
//	                 SHARED_BLOCK_REF, FREE_SPACE_EXTENT, QGROUP_RELATION)
//	extent_csum      start end length, and sums (hex strings) with CsumItems
//	block_group      used chunk_objectid flags flag_names
//	free_space_info  extent_count flags
//	free_space_bitmap bitmap_hex
//	free_space_header location:KEY generation num_entries num_bitmaps
//	chunk            length owner stripe_len type type_name io_align io_width
//	                 sector_size num_stripes sub_stripes
//	                 stripes: [{devid, offset, dev_uuid}]
//	dev_item         devid total_bytes bytes_used io_align io_width sector_size
//	                 type generation start_offset dev_group seek_speed
//	                 bandwidth uuid fsid
//	dev_extent       chunk_tree chunk_objectid chunk_offset length chunk_tree_uuid
//	dev_stats        devid write_errs read_errs flush_errs corruption_errs
//	                 generation_errs, unknown: [N] for longer items
//	dev_replace      src_devid cursor_left cursor_right
//	                 cont_reading_from_srcdev_mode replace_state time_started
//	                 time_stopped num_write_errors num_uncorrectable_read_errors
//	balance          flags data metadata system (each: profiles usage
//	                 usage_min usage_max devid pstart pend vstart vend target
//	                 flags limit limit_min limit_max stripes_min stripes_max)
//	qgroup_status    version generation flags flag_names rescan, enable_gen
//	                 (unless the item is the old 32-byte form)
//	qgroup_info      generation referenced referenced_compressed exclusive
//	                 exclusive_compressed
//	qgroup_limit     flags max_referenced max_exclusive rsv_referenced
//	                 rsv_exclusive
//	uuid             uuid (rebuilt from the key) subvol_ids: [N]
//	string           data
//	verity_desc      size encryption (offset 0 only)
//
// Names ("name", string "data") are JSON strings; when the bytes are not
// valid UTF-8 a "name_hex" (or "data_hex") member carries them exactly.
// With HideNames names and xattr values are "HIDDEN". All numbers are
// unsigned decimal integers except those the format defines as signed
// (timestamps' sec). Members are written in the order listed and new
// members are only ever added at the end of an object.
//
// SuperJSON writes one superblock copy as one object: bytenr_read, device,
// csum_type, csum_type_name, csum, csum_match, then every field
// (bytenr flags magic magic_match fsid metadata_uuid label generation root
// sys_array_size chunk_root_generation root_level chunk_root
// chunk_root_level log_root log_root_transid log_root_level total_bytes
// bytes_used sectorsize nodesize leafsize stripesize root_dir num_devices
// compat_flags compat_ro_flags incompat_flags cache_generation
// uuid_tree_generation nr_global_roots dev_item), sys_chunks:
// [{key, chunk}] (and sys_chunks_error) and backup_roots: [BACKUP], where
// BACKUP is {tree_root, chunk_root, extent_root, fs_root, dev_root,
// csum_root (each {bytenr, generation, level}), total_bytes, bytes_used,
// num_devices}.
//
// # What it must never do
//
// It only reads. Hostile blocks never make it panic, loop or read outside
// the bytes it was given: items are read through bounded views, loops over
// an item's entries are bounded by the block, and a tree walk visits each
// block once.
package dump
