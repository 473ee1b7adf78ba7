//go:build freebsd || openbsd || dragonfly

package btrfs

import "syscall"

// errNoData is what Getxattr and Removexattr return for an attribute the
// inode does not have. These hosts have no ENODATA; their extattr calls
// say ENOATTR for the same condition, so that is what callers expect.
const errNoData = syscall.ENOATTR
