// Package blockdev is the device layer: byte-addressed storage that the
// filesystem reads and writes at physical offsets, plus the pieces that only
// need devices to work: the read cache, superblock reading and the discovery
// of which devices form one filesystem.
//
// What it offers:
//   - Device, the interface every layer above uses for I/O, with three
//     implementations: File (image files and block devices), Mem (memory,
//     with crash simulation) and Faulty (error injection around another
//     Device); Counted counts the bytes written through another Device.
//   - Cache, a page cache that is itself a Device, so it can be stacked
//     under any reader.
//   - ReadSuper, ReadBestSuper and ReadSuperFallback, which return only
//     superblocks whose checksum and fields are valid.
//   - Scan, which opens a list of paths and groups them into a Set by
//     filesystem id and device id.
//   - The writer's claim (busy.go): a file or device opened for writing is
//     locked (an OFD lock on Linux, flock on the BSDs and macOS,
//     LockFileEx on Windows) so that a second writer, in this process or
//     another, is refused at once (ErrLocked); on Linux a filesystem the
//     kernel has mounted, directly or through a loop device, is refused
//     too (ErrMounted). Readers take no lock (docs/design/0010).
//
// Invariants:
//   - A read that cannot be satisfied in full because the device ends returns
//     the bytes it got together with io.EOF or io.ErrUnexpectedEOF; never a
//     silent short read. Layers above treat that as a truncated (corrupt)
//     image.
//   - A write never extends a device: writes past Size fail with
//     ErrOutOfRange, so a file image keeps the size it was created with.
//   - Every Device here is safe for concurrent use by several goroutines.
//   - Nothing read from a device is used to size an allocation without a
//     bound check; superblocks are fixed 4096-byte reads.
//   - A File open for writing holds its lock until Close; a writing open
//     that is refused changes nothing (no truncation, no extension).
//
// This package must never know about chunks, trees or logical addresses: it
// speaks physical offsets only. It imports internal/disk for the superblock
// format and nothing else from the module. It reads /proc and /sys (Linux)
// only to tell whether the kernel has a device mounted.
package blockdev
