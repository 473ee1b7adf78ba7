//go:build !linux

package cli

import (
	"errors"
)

// reflinkCheck: cloning file ranges (FICLONERANGE) is Linux's.
func reflinkCheck(string, string) error {
	return errors.New("--reflink: cloning file ranges needs Linux")
}
