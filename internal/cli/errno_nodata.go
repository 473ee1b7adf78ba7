//go:build !(freebsd || openbsd || dragonfly)

package cli

import "syscall"

// errNoData is the library's error for a missing xattr on this host.
const errNoData = syscall.ENODATA
