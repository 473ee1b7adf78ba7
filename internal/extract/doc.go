// Package extract copies a tree out of a btrfs filesystem onto the host:
// contents with holes kept as holes, modes, owners (when permitted),
// nanosecond times, extended attributes, symlinks, hardlinks, device nodes,
// fifos and sockets, and subvolumes as directories where they sit.
//
// Damage is local where it can be: a file that cannot be read is reported
// and the rest goes on; Run returns an error listing what failed.
//
// It reads only through the public btrfs API and never writes to the
// filesystem it reads.
package extract
