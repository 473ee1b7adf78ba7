//go:build linux

package btrfstest

import (
	"encoding/binary"
	"fmt"
	"os"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// FiemapExtent is one extent of a host file as the kernel's FIEMAP
// reports it: Length bytes at file offset Logical lie at Physical on
// the filesystem's device, Shared when another file or snapshot refers
// to them too (FIEMAP_EXTENT_SHARED).
type FiemapExtent struct {
	Logical, Physical, Length uint64
	Shared                    bool
}

// The FIEMAP ioctl (linux/fiemap.h), which golang.org/x/sys does not
// define: a 32-byte header and 56-byte extent records.
const (
	fsIocFiemap       = 0xc020660b // _IOWR('f', 11, struct fiemap)
	fiemapFlagSync    = 0x1
	fiemapExtentLast  = 0x1
	fiemapExtentShare = 0x2000
	fiemapHeader      = 32
	fiemapRecord      = 56
	fiemapBatch       = 256
)

// Fiemap returns every extent of the host file path (syncing it first),
// in file order.
func Fiemap(tb testing.TB, path string) []FiemapExtent {
	tb.Helper()
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	var out []FiemapExtent
	buf := make([]byte, fiemapHeader+fiemapRecord*fiemapBatch)
	le := binary.LittleEndian
	for start := uint64(0); ; {
		clear(buf)
		le.PutUint64(buf[0:], start)
		le.PutUint64(buf[8:], ^uint64(0)-start)
		le.PutUint32(buf[16:], fiemapFlagSync)
		le.PutUint32(buf[24:], fiemapBatch)
		if _, _, e := unix.Syscall(unix.SYS_IOCTL, f.Fd(), fsIocFiemap, uintptr(unsafe.Pointer(&buf[0]))); e != 0 {
			tb.Fatalf("FIEMAP %s: %v", path, e)
		}
		n := int(le.Uint32(buf[20:]))
		if n == 0 {
			return out
		}
		for i := range n {
			r := buf[fiemapHeader+i*fiemapRecord:]
			flags := le.Uint32(r[40:])
			e := FiemapExtent{Logical: le.Uint64(r[0:]), Physical: le.Uint64(r[8:]), Length: le.Uint64(r[16:]),
				Shared: flags&fiemapExtentShare != 0}
			out = append(out, e)
			start = e.Logical + e.Length
			if flags&fiemapExtentLast != 0 {
				return out
			}
		}
	}
}

// String renders e for messages.
func (e FiemapExtent) String() string {
	s := ""
	if e.Shared {
		s = " shared"
	}
	return fmt.Sprintf("[%d,+%d)@%d%s", e.Logical, e.Length, e.Physical, s)
}
