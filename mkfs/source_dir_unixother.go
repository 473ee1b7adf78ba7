//go:build unix && !linux

package mkfs

// noAtimeFlag is 0: O_NOATIME is Linux's.
const noAtimeFlag = 0

// hostXattrs reads no extended attributes: these hosts name them without
// Linux's namespaces (or in other ones, with other encodings, such as
// FreeBSD's ACLs), and btrfs stores Linux's. Copying them would make
// attributes Linux either rejects or misreads, so images built here have
// none.
func hostXattrs(string) ([]Xattr, error) { return nil, nil }
