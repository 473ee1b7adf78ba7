//go:build !(linux || windows || darwin || freebsd || openbsd || netbsd || dragonfly)

package cli

import "os"

// isTerminal says no: this host has no terminal query here, so the
// progress display stays off.
func isTerminal(*os.File) bool { return false }
