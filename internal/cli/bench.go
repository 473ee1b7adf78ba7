package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gobtrfs/btrfs/internal/bench"
)

// NewBenchCommand returns the `bench` command and its subcommands: ctree
// measures the engine in memory, fileio the filesystem in an image.
func NewBenchCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure the B-tree engine in memory, or the filesystem under sysbench fileio",
		Long: `bench runs workloads and prints what the filesystem's engines did and how
fast: ctree drives one B-tree over an in-memory block store; fileio runs
sysbench's fileio benchmark on an image through the filesystem.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return usagef("missing subcommand; see --help") },
	}
	cmd.AddCommand(newBenchCtreeCommand(), newBenchFileioCommand())
	return cmd
}

func newBenchCtreeCommand() *cobra.Command {
	cfg := bench.DefaultConfig()
	var compare, jsonOut bool
	cmd := &cobra.Command{
		Use:   "ctree [flags]",
		Short: "Measure the copy-on-write B-tree, with and without the push_leaf_right shortcut",
		Long: `ctree inserts (or deletes) items in one B-tree over an in-memory store,
committing every --commit-every operations, and reports the engine's
counters, the time, and the final shape of the tree.

Workloads:
  append       one stream of increasing keys
  interleaved  --streams streams (files), each appending increasing keys in
               a key range of its own, taking turns at random: the shape of
               the seed patch's sysbench run (512 files of file extent items)
  random       uniformly random keys
  delete       random deletes from a tree of --ops items (filled untimed)

Figures reported: ` + bench.Names() + `.

--compare runs the workload twice in one process, with the seed patch's
shortcut on and off, and prints them side by side with the ratio on/off.
--json prints one JSON object per run (with --compare, an array of the two
runs, each with a boolean "shortcut"). --verify checks every invariant of
the tree at each commit and at the end; a violation exits non-zero.`,
		Example: `  gobtrfs bench ctree --compare
  gobtrfs bench ctree --workload interleaved --streams 512 --ops 2000000 --compare --json
  gobtrfs bench ctree --workload random --nodesize 4096 --item-size 200 --verify`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := cfg.Validate(); err != nil {
				return usagef("%v", err)
			}
			out := cmd.OutOrStdout()
			if !compare {
				r, err := bench.Run(cfg)
				if err != nil {
					return err
				}
				if jsonOut {
					return writeBenchJSON(out, r)
				}
				return bench.WriteTable(out, cfg, r)
			}
			on, off, err := bench.Compare(cfg)
			if err != nil {
				return err
			}
			if jsonOut {
				return writeBenchJSON(out, []bench.Result{on, off})
			}
			return bench.WriteComparison(out, cfg, on, off)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Workload, "workload", cfg.Workload, "workload: "+strings.Join(bench.Workloads, ", "))
	f.IntVar(&cfg.Ops, "ops", cfg.Ops, "operations to measure")
	f.IntVar(&cfg.Streams, "streams", cfg.Streams, "interleaved: number of streams")
	f.IntVar(&cfg.NodeSize, "nodesize", cfg.NodeSize, "tree block size in bytes, 4096 to 65536")
	f.IntVar(&cfg.ItemSize, "item-size", cfg.ItemSize,
		fmt.Sprintf("item data bytes (%d: a file extent item)", bench.FileExtentItemSize))
	f.IntVar(&cfg.CommitEvery, "commit-every", cfg.CommitEvery, "operations per transaction")
	f.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "seed of the random choices")
	f.BoolVar(&cfg.NoShortcut, "no-push-right-shortcut", false, "turn off the seed patch's shortcut in push_leaf_right")
	f.BoolVar(&cfg.Verify, "verify", false, "verify the tree at every commit and at the end")
	f.BoolVar(&compare, "compare", false, "run with and without the shortcut and print both")
	f.BoolVar(&jsonOut, "json", false, "print JSON")
	return cmd
}

// writeBenchJSON prints v as one line of JSON.
func writeBenchJSON(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
