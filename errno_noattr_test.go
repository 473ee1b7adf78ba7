//go:build freebsd || openbsd || dragonfly

package btrfs_test

import "syscall"

// errNoData is the error the library gives for a missing xattr on this
// host (see the library's errNoData).
const errNoData = syscall.ENOATTR
