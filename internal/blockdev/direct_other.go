//go:build !linux

package blockdev

import "os"

// directIO is Linux's O_DIRECT path; elsewhere every write is buffered.
type directIO struct{}

func (*directIO) writeAt(*os.File, []byte, int64) (bool, int, error) { return false, 0, nil }
func (*directIO) disable()                                           {}
func (*directIO) count() int                                         { return 0 }
func (*directIO) close() error                                       { return nil }
