package cli

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gobtrfs/btrfs/internal/blockdev"
	"github.com/gobtrfs/btrfs/internal/disk"
	"github.com/gobtrfs/btrfs/internal/dump"
)

// NewDumpSuperCommand returns `gobtrfs dump-super`, the equivalent of
// `btrfs inspect-internal dump-super`.
func NewDumpSuperCommand() *cobra.Command {
	var o superFlags
	cmd := &cobra.Command{
		Use:   "dump-super [flags] IMAGE [IMAGE...]",
		Short: "Print the superblock of an image as btrfs inspect-internal dump-super does",
		Long: `dump-super prints the superblock of each IMAGE (an image file or block device)
in the text form of 'btrfs inspect-internal dump-super' (btrfs-progs 6.2), line
for line. It reads only the superblock, so it works on images that cannot be
opened otherwise, and prints invalid superblocks too, marking a wrong checksum
or fsid with [DON'T MATCH]. A copy with a bad magic is refused unless --force
is given. A copy that lies beyond the end of the device prints as an empty
line.

With --json each copy is one line of JSON instead: where it was read, whether
checksum and magic match, and every field (see the package doc of
internal/dump for the schema).`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return runDumpSuper(cmd, args, &o) },
	}
	f := cmd.Flags()
	f.BoolVarP(&o.full, "full", "f", false, "also print the sys_chunk_array and the backup roots")
	f.BoolVarP(&o.all, "all", "a", false, "print all three superblock copies")
	f.StringVarP(&o.copy, "super", "s", "0", "copy to print: 0, 1 or 2 (a larger number is taken as --bytenr, as progs does)")
	f.BoolVarP(&o.force, "force", "F", false, "print superblocks with a bad magic too")
	f.Uint64Var(&o.bytenr, "bytenr", 0, "read the superblock at this byte offset instead")
	f.BoolVar(&o.json, "json", false, "print JSON lines instead of text")
	return cmd
}

type superFlags struct {
	full, all, force, json bool
	copy                   string
	bytenr                 uint64
}

// offset resolves --super and --bytenr to the byte offset of the copy.
func (o *superFlags) offset(errw io.Writer, cmd *cobra.Command) (uint64, error) {
	if cmd.Flags().Changed("bytenr") {
		return o.bytenr, nil
	}
	n, err := strconv.ParseUint(o.copy, 10, 64)
	if err != nil {
		return 0, usagef("invalid --super %q: %v", o.copy, err)
	}
	if n < disk.SuperMirrorMax {
		return uint64(disk.SuperblockOffsetOf(int(n))), nil
	}
	fmt.Fprintf(errw, "WARNING: deprecated use of -s <bytenr> with %d, assuming --bytenr\n", n)
	return n, nil
}

func runDumpSuper(cmd *cobra.Command, args []string, o *superFlags) error {
	out, errw := cmd.OutOrStdout(), cmd.ErrOrStderr()
	off, err := o.offset(errw, cmd)
	if err != nil {
		return err
	}
	// Like progs, the first device that fails ends the command.
	for _, path := range args {
		d, err := blockdev.OpenFile(path, true)
		if err != nil {
			return fmt.Errorf("cannot open %s: %w", path, err)
		}
		if o.all {
			for i := range disk.SuperMirrorMax {
				if err := dumpSuperCopy(out, errw, d, path, uint64(disk.SuperblockOffsetOf(i)), o); err != nil {
					d.Close()
					return err
				}
			}
		} else if err := dumpSuperCopy(out, errw, d, path, off, o); err != nil {
			d.Close()
			return err
		}
		d.Close()
	}
	return nil
}

// dumpSuperCopy prints the superblock at off, followed by an empty line
// (text form). A copy entirely beyond the end of the device prints only
// the empty line, as progs does.
func dumpSuperCopy(out, errw io.Writer, d blockdev.Device, path string, off uint64, o *superFlags) error {
	raw := make([]byte, disk.SuperblockSize)
	if off >= uint64(d.Size()) {
		if o.json {
			return nil
		}
		_, err := io.WriteString(out, "\n")
		return err
	}
	if n, err := d.ReadAt(raw, int64(off)); n < len(raw) {
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return fmt.Errorf("failed to read the superblock on %s at %d: %w", path, off, err)
	}
	var sb disk.Superblock
	if err := sb.Decode(raw); err != nil {
		return err
	}
	badMagic := sb.Magic != disk.Magic && !o.force
	if o.json {
		if badMagic {
			return fmt.Errorf("bad magic on superblock on %s at %d (use --force to dump it anyway)", path, off)
		}
		return dump.SuperJSON(out, &sb, raw, off, path)
	}
	if err := dump.SuperHeader(out, off, path); err != nil {
		return err
	}
	if badMagic {
		return fmt.Errorf("bad magic on superblock on %s at %d (use --force to dump it anyway)", path, off)
	}
	if err := dump.Super(out, &sb, raw, dump.SuperOptions{Full: o.full, Errors: errw}); err != nil {
		return err
	}
	_, err := io.WriteString(out, "\n")
	return err
}

// NewDumpTreeCommand returns `gobtrfs dump-tree`, the equivalent of
// `btrfs inspect-internal dump-tree`.
func NewDumpTreeCommand() *cobra.Command {
	var o treeFlags
	cmd := &cobra.Command{
		Use:   "dump-tree [flags] IMAGE",
		Short: "Print the trees of an image as btrfs inspect-internal dump-tree does",
		Long: `dump-tree prints the B-trees of the filesystem in IMAGE in the text form of
'btrfs inspect-internal dump-tree' (btrfs-progs 6.2), line for line, starting
with the same "btrfs-progs v6.2" banner so the outputs compare equal.

It reads the superblock and the chunk tree, then only the blocks it prints,
and checks in each block only what btrfs-progs checks (checksum, address,
fsid, item layout), so it also prints trees other commands refuse.

Without -t or -b it prints the root tree, the chunk tree, the log root tree
(if any), every tree that has a ROOT_ITEM, and the totals of the superblock.
Trees are walked breadth first (a node, then each level below it) unless
--dfs is given.

TREE for -t is a tree id or a name: root, extent, chunk, dev, device, fs,
csum, checksum, quota, uuid, free-space, tree-log, tree-log-fixup,
tree-reloc, data-reloc, block-group (with '-' or '_', any case, optionally
with a _tree suffix or a BTRFS_ prefix and _OBJECTID suffix).

Differences from btrfs-progs: -d/--device names another device of a
multi-device filesystem (as in every gobtrfs command), so progs' -d (device
trees only) is --device-tree here; --noscan is accepted and has no effect
(gobtrfs never scans for devices); -t also accepts names with dashes
(free-space, data-reloc), which progs 6.2 refuses. Messages progs writes to
standard error are worded differently.

With --json the output is JSON lines: "tree" records introducing each tree,
one "block" record per tree block, and a final "totals" record (see the
package doc of internal/dump for the schema).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return runDumpTree(cmd, args[0], &o) },
	}
	o.fs.register(cmd)
	f := cmd.Flags()
	f.StringVarP(&o.tree, "tree", "t", "", "print only the tree with this id or name")
	f.StringArrayVarP(&o.blocks, "block", "b", nil, "print only the tree block at this logical address (repeatable)")
	f.BoolVar(&o.opts.Follow, "follow", false, "with -b, also print every block under the given blocks")
	f.BoolVarP(&o.opts.Extents, "extents", "e", false, "print only the leaves of the extent and device trees")
	f.BoolVar(&o.opts.Device, "device-tree", false, "print only the root, chunk and device trees (progs' -d)")
	f.BoolVarP(&o.opts.Roots, "roots", "r", false, "print only one line per tree root")
	f.BoolVarP(&o.opts.Backups, "backups", "R", false, "like --roots, plus the backup roots of the superblock")
	f.BoolVarP(&o.opts.UUID, "uuid", "u", false, "print only the uuid tree")
	f.BoolVar(&o.bfs, "bfs", false, "breadth-first traversal (the default)")
	f.BoolVar(&o.opts.DFS, "dfs", false, "depth-first traversal")
	f.BoolVar(&o.opts.HideNames, "hide-names", false, "print HIDDEN instead of file names, xattr names and values")
	f.BoolVar(&o.opts.CsumHeaders, "csum-headers", false, "print the checksum stored in each block header")
	f.BoolVar(&o.opts.CsumItems, "csum-items", false, "print every checksum of the checksum items")
	f.BoolVar(&o.noscan, "noscan", false, "accepted for compatibility; gobtrfs never scans for devices")
	f.BoolVar(&o.opts.JSON, "json", false, "print JSON lines instead of text")
	return cmd
}

type treeFlags struct {
	fs          fsFlags
	tree        string
	blocks      []string
	bfs, noscan bool
	opts        dump.TreeOptions
}

func runDumpTree(cmd *cobra.Command, image string, o *treeFlags) error {
	if o.bfs && o.opts.DFS {
		return usagef("--bfs and --dfs are mutually exclusive")
	}
	var id disk.ObjectID
	if o.tree != "" {
		var err error
		if id, err = ParseTreeID(o.tree); err != nil {
			return usagef("%v", err)
		}
	}
	addrs := make([]uint64, len(o.blocks))
	for i, s := range o.blocks {
		a, err := strconv.ParseUint(s, 0, 64)
		if err != nil {
			return usagef("invalid block number %q", s)
		}
		addrs[i] = a
	}
	img, err := dump.OpenImage(append([]string{image}, o.fs.devices...), o.fs.superFallback)
	if err != nil {
		return err
	}
	defer img.Close()
	var src dump.Source = img
	out := cmd.OutOrStdout()
	opts := o.opts
	opts.Errors = cmd.ErrOrStderr()
	sb := src.Superblock()
	opts.CsumType, opts.SectorSize = sb.CsumType, sb.SectorSize
	if !opts.JSON {
		if _, err := fmt.Fprintln(out, dump.ProgsBanner); err != nil {
			return err
		}
	}
	switch {
	case len(addrs) > 0:
		return dump.Blocks(out, src, addrs, opts)
	case id != 0:
		return dump.Tree(out, src, id, opts)
	}
	return dump.All(out, src, opts)
}

// treeNames are the names -t accepts, longest first where one is a
// prefix of another.
var treeNames = []struct {
	name string
	id   disk.ObjectID
}{
	{"ROOT", disk.RootTreeObjectID}, {"EXTENT", disk.ExtentTreeObjectID}, {"CHUNK", disk.ChunkTreeObjectID},
	{"DEVICE", disk.DevTreeObjectID}, {"DEV", disk.DevTreeObjectID}, {"FS", disk.FSTreeObjectID},
	{"CSUM", disk.CsumTreeObjectID}, {"CHECKSUM", disk.CsumTreeObjectID}, {"QUOTA", disk.QuotaTreeObjectID},
	{"UUID", disk.UUIDTreeObjectID}, {"FREE_SPACE", disk.FreeSpaceTreeObjectID},
	{"TREE_LOG_FIXUP", disk.TreeLogFixupObjectID}, {"TREE_LOG", disk.TreeLogObjectID},
	{"TREE_RELOC", disk.TreeRelocObjectID}, {"DATA_RELOC", disk.DataRelocTreeObjectID},
	{"BLOCK_GROUP", disk.BlockGroupTreeObjectID},
}

// ParseTreeID parses the argument of dump-tree -t: a decimal tree id or a
// tree name as progs accepts it (case-insensitive, optional BTRFS_ prefix,
// _TREE and _OBJECTID suffixes), with '-' accepted for '_'.
func ParseTreeID(s string) (disk.ObjectID, error) {
	if n, err := strconv.ParseUint(s, 10, 64); err == nil && n != 0 {
		return disk.ObjectID(n), nil
	}
	u := strings.ToUpper(strings.ReplaceAll(s, "-", "_"))
	u = strings.TrimPrefix(u, "BTRFS_")
	for _, t := range treeNames {
		rest, ok := strings.CutPrefix(u, t.name)
		if !ok {
			continue
		}
		rest = strings.TrimPrefix(rest, "_TREE")
		rest = strings.TrimPrefix(rest, "_OBJECTID")
		if rest == "" {
			return t.id, nil
		}
	}
	return 0, fmt.Errorf("unrecognized tree id: %s", s)
}
