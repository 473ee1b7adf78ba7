//go:build !(freebsd || openbsd || dragonfly)

package btrfs

import "syscall"

// errNoData is what Getxattr and Removexattr return for an attribute the
// inode does not have: ENODATA, as Linux's lgetxattr(2) says (macOS's
// says ENOATTR, but we keep Linux's answer where the errno exists; the
// BSDs without ENODATA use ENOATTR, errno_noattr.go).
const errNoData = syscall.ENODATA
