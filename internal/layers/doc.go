// Package layers holds no code: its test enforces the project's import
// graph, so the architecture cannot drift silently.
//
// Each package has a rank; a package may import only packages of a lower
// rank. Ranks, bottom up:
//
//	0  internal/disk, internal/compress, internal/invariants   format and pure codecs
//	   internal/modespec                                       chmod(1) modes
//	1  internal/blockdev                                       devices, cache
//	   internal/probe                                          what else a device holds
//	2  internal/chunk                                          logical -> physical
//	3  internal/ctree                                          the B-tree
//	4  internal/alloc, internal/bench                          free space; benchmark workloads
//	5  internal/txn                                            transactions
//	6  btrfs (the module root)                                 the filesystem
//	7  mkfs, check, fuse, internal/dump, internal/extract      tools over the filesystem
//	   internal/fileio                                         sysbench fileio over the public API
//	8  internal/cli                                            the command line
//	9  cmd/gobtrfs
//
// In addition check never imports the writer (txn, alloc), and
// internal/btrfstest is imported by tests only.
package layers
