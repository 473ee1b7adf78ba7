//go:build !(freebsd || openbsd || dragonfly)

package btrfs

import "syscall"

// errNoData is what Getxattr and Removexattr return for an attribute the
// inode does not have. Linux (and the other hosts with the errno) says
// ENODATA there, so callers can compare with the error of lgetxattr(2).
const errNoData = syscall.ENODATA
