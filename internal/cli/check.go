package cli

import (
	"fmt"
	"os"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/gobtrfs/btrfs/check"
)

// Exit statuses of gobtrfs check, as btrfs check's: problems found, or
// the check could not run.
const (
	checkExitProblems = 1
	checkExitCannot   = 2
)

func newCheckCommand() *cobra.Command {
	var (
		dataCsum bool
		jsonF    bool
		readonly bool
		devices  []string
		memMiB   int64
	)
	cmd := &cobra.Command{
		Use:   "check [--check-data-csum] [--json] [-d DEVICE]... IMAGE",
		Short: "Verify a whole filesystem read-only, as btrfs check does",
		Long: `Verify a whole filesystem read-only, as btrfs check --readonly does, in
its phases and words: the log, superblock and root items, every tree
block, extent references, block groups and device extents, the free-space
tree, the fs trees (inodes, names, file extents), the csum tree, root refs
and quota groups.
--check-data-csum also reads every data sector on every mirror and
verifies its checksum. Nothing is ever written. --memory-limit bounds the
memory used (MiB); what must be cross-referenced beyond it is sorted in
temporary files (docs/design/0024-check-memory.md).

Exit status: 0 clean, 1 problems found, 2 the check could not run.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			_ = readonly // always read-only; accepted for btrfs check's command lines
			out, errw := cmd.OutOrStdout(), cmd.ErrOrStderr()
			devs := append([]string{args[0]}, devices...)
			opts := check.Options{DataCsum: dataCsum, MemoryLimit: memMiB << 20}
			if memMiB > 0 && os.Getenv("GOMEMLIMIT") == "" {
				// The checker's own buffers stay within the limit; this
				// makes the garbage collector keep the process near it too
				// (a soft limit: past it the collector runs more often).
				debug.SetMemoryLimit(memMiB << 20)
			}
			if os.Getenv("GOGC") == "" {
				// Peak memory is what the check is measured by: the
				// command's collector target (cmd/gobtrfs: 400, for
				// image builds) would let the heap grow to five times
				// what lives; the Go default, twice. --check-data-csum
				// of 1 GiB: 28 MB peak RSS before, 19 MB after
				// (btrfs check: 21 MB).
				debug.SetGCPercent(100)
			}
			if !jsonF {
				fmt.Fprintln(out, "Opening filesystem to check...")
				fmt.Fprintf(out, "Checking filesystem on %s\n", args[0])
				opts.Log = func(line string) { fmt.Fprintln(errw, line) }
			}
			header := false
			rep, err := check.Run(cmd.Context(), devs, opts)
			if err != nil {
				return exitError{code: checkExitCannot, err: fmt.Errorf("cannot check %s: %w", args[0], err)}
			}
			if jsonF {
				if err := writeJSON(out, rep); err != nil {
					return err
				}
			} else {
				if !header {
					fmt.Fprintf(out, "UUID: %s\n", rep.UUID)
				}
				rep.WriteSummary(out)
			}
			if !rep.Clean() {
				return exitError{code: checkExitProblems}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.BoolVar(&dataCsum, "check-data-csum", false, "verify the checksum of every data sector, on every mirror")
	f.BoolVar(&jsonF, "json", false, "print the problems and the summary as JSON")
	f.StringArrayVarP(&devices, "device", "d", nil, "another device of the filesystem (repeatable)")
	f.Int64Var(&memMiB, "memory-limit", check.DefaultMemoryLimit>>20, "memory the check may use, in MiB (buffers past it spill to temporary files)")
	f.BoolVar(&readonly, "readonly", true, "check without writing (always; accepted for compatibility)")
	return cmd
}
