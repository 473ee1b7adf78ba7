package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gobtrfs/btrfs"
)

func newInfoCommand() *cobra.Command {
	var (
		ff    fsFlags
		jsonF bool
	)
	cmd := &cobra.Command{
		Use:   "info [--json] IMAGE",
		Short: "Show features, sizes, devices and block groups of a filesystem image",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			fsys, err := ff.open(args[0], warner(cmd))
			if err != nil {
				return err
			}
			defer fsys.Close()
			info, err := fsys.Info()
			if err != nil {
				return err
			}
			if jsonF {
				return writeJSON(cmd.OutOrStdout(), info)
			}
			printInfo(cmd.OutOrStdout(), info)
			return nil
		},
	}
	ff.register(cmd)
	cmd.Flags().BoolVar(&jsonF, "json", false, "print JSON")
	return cmd
}

func printInfo(w io.Writer, in *btrfs.Info) {
	label := in.Label
	if label == "" {
		label = "(none)"
	}
	fmt.Fprintf(w, "Label:             %s\n", label)
	fmt.Fprintf(w, "UUID:              %s\n", in.UUID)
	fmt.Fprintf(w, "Generation:        %d\n", in.Generation)
	fmt.Fprintf(w, "Node size:         %d\n", in.NodeSize)
	fmt.Fprintf(w, "Sector size:       %d\n", in.SectorSize)
	fmt.Fprintf(w, "Checksum:          %s\n", in.Checksum)
	fmt.Fprintf(w, "Features:          %s\n", strings.Join(in.Features, ", "))
	fmt.Fprintf(w, "Compat RO:         %s\n", strings.Join(in.CompatRO, ", "))
	fmt.Fprintf(w, "Total bytes:       %d (%s)\n", in.TotalBytes, humanBytes(in.TotalBytes))
	fmt.Fprintf(w, "Bytes used:        %d (%s)\n", in.BytesUsed, humanBytes(in.BytesUsed))
	fmt.Fprintf(w, "Default subvolume: %d\n", in.DefaultSubvol)
	fmt.Fprintf(w, "\nDevices: %d\n", in.NumDevices)
	fmt.Fprintf(w, "  %5s %12s %12s  %-36s  %s\n", "devid", "size", "used", "uuid", "path")
	for _, d := range in.Devices {
		path := d.Path
		if d.Missing {
			path = "<missing>"
		}
		fmt.Fprintf(w, "  %5d %12s %12s  %-36s  %s\n", d.ID, humanBytes(d.TotalBytes), humanBytes(d.BytesUsed), d.UUID, path)
	}
	fmt.Fprintf(w, "\nBlock groups: %d\n", len(in.BlockGroups))
	fmt.Fprintf(w, "  %-16s %-8s %14s %12s %12s %6s\n", "type", "profile", "start", "length", "used", "use%")
	for _, bg := range in.BlockGroups {
		pct := 0.0
		if bg.Length > 0 {
			pct = float64(bg.Used) * 100 / float64(bg.Length)
		}
		fmt.Fprintf(w, "  %-16s %-8s %14d %12s %12s %5.1f%%\n", bg.Type, bg.Profile, bg.Start, humanBytes(bg.Length), humanBytes(bg.Used), pct)
	}
}

// humanBytes prints a size with binary units, like btrfs-progs' --human-readable.
func humanBytes(n uint64) string {
	const units = "KMGTPE"
	if n < 1024 {
		return fmt.Sprintf("%dB", n)
	}
	v := float64(n)
	i := -1
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	return fmt.Sprintf("%.2f%ciB", v, units[i])
}
