//go:build !linux

package cli

import (
	"errors"
	"io"
)

// reflinkCheck: cloning file ranges (FICLONERANGE) is Linux's.
func reflinkCheck(io.Writer, string, string) error {
	return errors.New("--reflink: cloning file ranges needs Linux")
}
