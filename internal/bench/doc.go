// Package bench holds the workloads measured by `gobtrfs bench` and by the
// `go test -bench` benchmarks, so both run the same code.
//
// The ctree benchmark reproduces the measurement of the seed patch ("Btrfs:
// more efficient push_leaf_right"): it drives a ctree.Tree over an
// in-memory store with one of four key patterns (append, interleaved
// streams, random, random deletes), commits every N operations, and
// reports the engine's counters, the time, and the final shape of the
// tree. Compare runs the same workload with the shortcut on and off.
//
// Runs are deterministic for a given Config (same seed, same counters);
// only the times vary. This package must never touch real devices or keep
// global state.
package bench
