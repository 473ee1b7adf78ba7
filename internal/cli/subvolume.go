package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gobtrfs/btrfs"
)

func newSubvolumeCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "subvolume",
		Short: "Subvolume commands",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return usagef("missing subcommand; see --help") },
	}
	cmd.AddCommand(newSubvolumeListCommand(), newSubvolumeCreateCommand(), newSubvolumeSnapshotCommand(), newSubvolumeDeleteCommand(), newSubvolumeShowCommand(),
		newSubvolumeGetDefaultCommand(), newSubvolumeSetDefaultCommand())
	return cmd
}

func newSubvolumeListCommand() *cobra.Command {
	var (
		ff                                fsFlags
		parent, uuid, puuid, ruuid, jsonF bool
		readonly, snapshots               bool
	)
	cmd := &cobra.Command{
		Use:   "list [options] IMAGE",
		Short: "List the subvolumes and snapshots of a filesystem image",
		Long: `List subvolumes and snapshots in id order, with their path from the top level,
in the format of btrfs subvolume list:

  ID 256 gen 9 top level 5 path home

"top level" is the id of the subvolume holding the entry. Subvolumes being
deleted are not listed.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			fsys, err := ff.open(args[0], warner(cmd))
			if err != nil {
				return err
			}
			defer fsys.Close()
			subs, err := fsys.Subvolumes()
			if err != nil {
				return err
			}
			var keep []btrfs.SubvolumeInfo
			for _, s := range subs {
				if readonly && !s.ReadOnly || snapshots && s.ParentUUID == zeroUUID {
					continue
				}
				keep = append(keep, s)
			}
			if jsonF {
				out := make([]subvolJSON, 0, len(keep))
				for _, s := range keep {
					out = append(out, subvolToJSON(s))
				}
				return writeJSON(cmd.OutOrStdout(), out)
			}
			for _, s := range keep {
				printSubvol(cmd.OutOrStdout(), s, parent, uuid, puuid, ruuid, snapshots)
			}
			return nil
		},
	}
	ff.register(cmd)
	f := cmd.Flags()
	f.BoolVarP(&parent, "parent", "p", false, "print the parent id")
	f.BoolVarP(&uuid, "uuid", "u", false, "print the uuid")
	f.BoolVarP(&puuid, "parent-uuid", "q", false, "print the parent uuid (snapshot source)")
	f.BoolVarP(&ruuid, "received-uuid", "R", false, "print the received uuid")
	f.BoolVarP(&readonly, "readonly", "r", false, "list read-only subvolumes only")
	f.BoolVarP(&snapshots, "snapshots", "s", false, "list snapshots only")
	f.BoolVar(&jsonF, "json", false, "print a JSON array")
	return cmd
}

const zeroUUID = "00000000-0000-0000-0000-000000000000"

// uuidOrDash prints a uuid, or "-" padded to a uuid's width for none, as
// btrfs-progs aligns its columns.
func uuidOrDash(u string) string {
	if u == zeroUUID {
		return fmt.Sprintf("%-36s", "-")
	}
	return u
}

// printSubvol prints one line of subvolume list in btrfs-progs' column
// order; -s (snaps) adds the creation generation and time, as progs does.
func printSubvol(w io.Writer, s btrfs.SubvolumeInfo, parent, uuid, puuid, ruuid, snaps bool) {
	var b strings.Builder
	fmt.Fprintf(&b, "ID %d gen %d", s.ID, s.Generation)
	if snaps {
		fmt.Fprintf(&b, " cgen %d", s.OTransID)
	}
	if parent {
		fmt.Fprintf(&b, " parent %d", s.ParentID)
	}
	fmt.Fprintf(&b, " top level %d", s.ParentID)
	if snaps {
		fmt.Fprintf(&b, " otime %s", s.Otime.Local().Format("2006-01-02 15:04:05"))
	}
	if puuid {
		fmt.Fprintf(&b, " parent_uuid %s", uuidOrDash(s.ParentUUID))
	}
	if ruuid {
		fmt.Fprintf(&b, " received_uuid %s", uuidOrDash(s.ReceivedUUID))
	}
	if uuid {
		fmt.Fprintf(&b, " uuid %s", uuidOrDash(s.UUID))
	}
	fmt.Fprintf(&b, " path %s\n", s.Path)
	io.WriteString(w, b.String())
}

// writeJSON prints v as indented JSON with a final newline.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
