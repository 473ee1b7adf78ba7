package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gobtrfs/btrfs"
)

// btrfs property get/set/list on IMAGE[:PATH], with progs' three
// properties: ro (a subvolume's read-only flag), label (the filesystem's)
// and compression (a file's or directory's btrfs.compression).

// propDef is one property, in the order progs lists them.
type propDef struct {
	name, help string
	kind       string // the object type it belongs to: subvol, filesystem, inode
}

var propDefs = []propDef{
	{"ro", "read-only status of a subvolume", "subvol"},
	{"label", "label of the filesystem", "filesystem"},
	{"compression", "compression algorithm for the file or directory", "inode"},
}

// propObject is what IMAGE[:PATH] names, by the object types progs knows.
type propObject struct {
	fsys   *btrfs.FS
	path   string
	subvol uint64 // the subvolume PATH is the top of, 0 if none
	kinds  map[string]bool
}

// objectKinds parses -t as progs does (s, f, i, d abbreviations).
func objectKind(t string) (string, error) {
	switch {
	case t == "":
		return "", nil
	case strings.HasPrefix("subvol", t):
		return "subvol", nil
	case strings.HasPrefix("filesystem", t):
		return "filesystem", nil
	case strings.HasPrefix("inode", t):
		return "inode", nil
	case strings.HasPrefix("device", t):
		// An image is the filesystem's device: its label.
		return "filesystem", nil
	}
	return "", usagef("invalid object type: %s", t)
}

// openProp opens the object arg names; the top of the image (IMAGE or
// IMAGE:/) is the filesystem, a subvolume and an inode, as a mount point.
func openProp(cmd *cobra.Command, arg string, devices []string, writable bool) (*propObject, error) {
	image, p := splitImagePath(arg)
	fsys, err := openImage(image, &btrfs.Options{Devices: devices}, writable, warner(cmd))
	if err != nil {
		return nil, err
	}
	o := &propObject{fsys: fsys, path: p, kinds: map[string]bool{"inode": true}}
	if _, err := fsys.Lstat(p); err != nil {
		fsys.Close()
		return nil, err
	}
	if id, err := fsys.SubvolumeAt(p); err == nil {
		o.subvol = id
		o.kinds["subvol"] = true
	}
	if p == "." {
		o.kinds["filesystem"] = true
	}
	return o, nil
}

// get returns the value of property name, ok false when it is unset.
func (o *propObject) get(name string) (string, bool, error) {
	switch name {
	case "ro":
		info, err := o.fsys.SubvolumeInfoOf(o.subvol)
		if err != nil {
			return "", false, err
		}
		return fmt.Sprint(info.ReadOnly), true, nil
	case "label":
		return o.fsys.Label(), true, nil
	}
	v, err := o.fsys.Getxattr(o.path, "btrfs.compression")
	if errors.Is(err, errNoData) {
		return "", false, nil
	}
	return string(v), err == nil, err
}

// pick returns the properties a command acts on: name (checked against
// the object) or, without one, every property of the object's types
// (restricted to kind when -t gave one).
func (o *propObject) pick(name, kind string) ([]propDef, error) {
	var out []propDef
	for _, d := range propDefs {
		if name != "" && d.name != name || kind != "" && d.kind != kind {
			continue
		}
		if !o.kinds[d.kind] {
			if name != "" {
				return nil, fmt.Errorf("object is not compatible with property: %s", name)
			}
			continue
		}
		out = append(out, d)
	}
	if name != "" && len(out) == 0 {
		for _, d := range propDefs {
			if d.name == name {
				return nil, fmt.Errorf("object is not compatible with property: %s", name)
			}
		}
		return nil, fmt.Errorf("unknown property: %s", name)
	}
	return out, nil
}

func newPropertyCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "property",
		Short: "Get, set and list properties (ro, label, compression)",
		Long: `Properties as btrfs property handles them, on IMAGE[:PATH]:
  ro           read-only status of a subvolume (PATH the top of one)
  label        label of the filesystem (IMAGE or IMAGE:/)
  compression  compression algorithm for the file or directory (zlib, lzo,
               zstd, with a level as zstd:3, "no"/"none", or "" to remove)
The top of the image is the filesystem, a subvolume and a directory at once,
as a mount point is for progs.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return usagef("missing subcommand; see --help") },
	}
	cmd.AddCommand(newPropertyGetCommand(), newPropertySetCommand(), newPropertyListCommand())
	return cmd
}

func newPropertyGetCommand() *cobra.Command {
	var (
		devices []string
		typ     string
		jsonF   bool
	)
	cmd := &cobra.Command{
		Use:   "get [-t TYPE] IMAGE[:PATH] [NAME]",
		Short: "Print properties",
		Long: `Print NAME=VALUE for property NAME of the object, or for every property it has
(ro and label always, compression when set), as btrfs property get does.
TYPE (subvol, filesystem, inode, device) limits which properties apply.
With --json, an object of the properties printed.`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			kind, err := objectKind(typ)
			if err != nil {
				return err
			}
			o, err := openProp(cmd, args[0], devices, false)
			if err != nil {
				return err
			}
			defer o.fsys.Close()
			name := ""
			if len(args) == 2 {
				name = args[1]
			}
			defs, err := o.pick(name, kind)
			if err != nil {
				return err
			}
			vals := map[string]string{}
			var b strings.Builder
			for _, d := range defs {
				v, set, err := o.get(d.name)
				if err != nil {
					return err
				}
				if set {
					vals[d.name] = v
					fmt.Fprintf(&b, "%s=%s\n", d.name, v)
				}
			}
			if jsonF {
				return writeJSON(cmd.OutOrStdout(), vals)
			}
			_, err = cmd.OutOrStdout().Write([]byte(b.String()))
			return err
		},
	}
	cmd.Flags().StringArrayVar(&devices, "device", nil, "another device of a multi-device filesystem (repeatable)")
	cmd.Flags().StringVarP(&typ, "type", "t", "", "object type: subvol, filesystem, inode or device")
	cmd.Flags().BoolVar(&jsonF, "json", false, "print a JSON object")
	return cmd
}

func newPropertySetCommand() *cobra.Command {
	var (
		devices []string
		typ     string
		force   bool
	)
	cmd := &cobra.Command{
		Use:   "set [-f] [-t TYPE] IMAGE[:PATH] NAME VALUE",
		Short: "Set a property",
		Long: `Set property NAME of the object to VALUE, as btrfs property set does: ro takes
true or false (clearing it on a received subvolume needs -f), label any text
up to 255 bytes, compression zlib, lzo, zstd (zstd:3 and the like), no, none
or "" (removes the property). Compression changes the inode's compress flags
as the kernel does.`,
		Args: cobra.ExactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			kind, err := objectKind(typ)
			if err != nil {
				return err
			}
			o, err := openProp(cmd, args[0], devices, true)
			if err != nil {
				return err
			}
			defs, err := o.pick(args[1], kind)
			if err == nil {
				err = o.set(defs[0].name, args[2], force)
			}
			if err != nil {
				return errors.Join(err, o.fsys.Rollback(), o.fsys.Close())
			}
			return errors.Join(o.fsys.Commit(), o.fsys.Close())
		},
	}
	cmd.Flags().StringArrayVar(&devices, "device", nil, "another device of a multi-device filesystem (repeatable)")
	cmd.Flags().StringVarP(&typ, "type", "t", "", "object type: subvol, filesystem, inode or device")
	cmd.Flags().BoolVarP(&force, "force", "f", false, "clear ro of a received subvolume")
	return cmd
}

// set changes one property.
func (o *propObject) set(name, value string, force bool) error {
	switch name {
	case "ro":
		var ro bool
		switch value {
		case "true":
			ro = true
		case "false":
		default:
			return fmt.Errorf("invalid value for property: %s", value)
		}
		if !ro && !force {
			info, err := o.fsys.SubvolumeInfoOf(o.subvol)
			if err != nil {
				return err
			}
			if info.ReadOnly && info.ReceivedUUID != zeroUUID {
				return errors.New("cannot flip ro->rw with received_uuid set, use force option -f if you really want unset the read-only status")
			}
		}
		return o.fsys.SetSubvolumeReadOnly(o.subvol, ro)
	case "label":
		return o.fsys.SetLabel(value)
	}
	err := o.fsys.SetCompression(o.path, value)
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("failed to set compression for %s: %s", o.path, reason("", pe.Err))
	}
	return err
}

func newPropertyListCommand() *cobra.Command {
	var (
		devices []string
		typ     string
	)
	cmd := &cobra.Command{
		Use:   "list [-t TYPE] IMAGE[:PATH]",
		Short: "List the properties an object has",
		Long:  `List the properties that apply to the object, with a description each, as btrfs property list does.`,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			kind, err := objectKind(typ)
			if err != nil {
				return err
			}
			o, err := openProp(cmd, args[0], devices, false)
			if err != nil {
				return err
			}
			defer o.fsys.Close()
			defs, err := o.pick("", kind)
			if err != nil {
				return err
			}
			for _, d := range defs {
				fmt.Fprintf(cmd.OutOrStdout(), "%-20s%s\n", d.name, d.help)
			}
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&devices, "device", nil, "another device of a multi-device filesystem (repeatable)")
	cmd.Flags().StringVarP(&typ, "type", "t", "", "object type: subvol, filesystem, inode or device")
	return cmd
}
