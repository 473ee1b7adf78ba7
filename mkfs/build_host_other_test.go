//go:build !linux

package mkfs

import "testing"

// populateHost needs Linux to make device nodes, sockets, xattrs and
// foreign owners; the tests that use it verify through a kernel mount
// anyway.
func populateHost(t *testing.T, _ string, _ uint64) {
	t.Skip("populateHost needs Linux")
}
