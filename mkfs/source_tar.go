package mkfs

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
)

// TarSource reads the entries of a tar stream (ustar, pax and GNU
// formats, as archive/tar reads them) without extracting anything, so
// owners, device nodes and set-id bits need no privileges.
//
// What it maps:
//   - Regular files, directories, symlinks, hardlinks (TypeLink, to an
//     earlier member), character and block devices and fifos. Other member
//     types (GNU volume headers, multi-volume continuations, ...) are an
//     error naming the member.
//   - Owners (numeric uid/gid; user and group names are ignored), mode
//     bits, modification and access times with the precision the archive
//     has (pax keeps nanoseconds; ustar whole seconds; a missing access
//     time is the modification time).
//   - Extended attributes from pax records "SCHILY.xattr.NAME", the
//     spelling GNU tar, bsdtar and star write. ACL records (SCHILY.acl.*)
//     and LIBARCHIVE.xattr.* records are ignored.
//
// GNU and pax sparse members: archive/tar expands them on reading and does
// not say where the holes were, so such a file arrives as one data
// segment and its holes are written as zeros (the contents are right, the
// image uses more space than the archive describes).
//
// Directories that are only implied by member paths are created by Build
// (mode 0755, owned by root or the --chown owner).
type TarSource struct {
	tr  *tar.Reader
	err error
}

// NewTarSource returns a TarSource reading r from its current position.
func NewTarSource(r io.Reader) *TarSource { return &TarSource{tr: tar.NewReader(r)} }

// Next returns the next member as an entry, io.EOF at the end of the
// archive. Its data reader reads the member's contents from the stream.
func (s *TarSource) Next() (*Entry, error) {
	if s.err != nil {
		return nil, s.err
	}
	h, err := s.tr.Next()
	if err != nil {
		if err != io.EOF {
			err = fmt.Errorf("mkfs: tar: %w", err)
		}
		s.err = err
		return nil, err
	}
	e, err := tarEntry(h)
	if err != nil {
		return nil, err
	}
	if e.Kind == KindFile && e.Size > 0 {
		e.Segments = []Segment{{0, e.Size}}
		used := false
		e.Open = func() (io.ReadCloser, error) {
			if used {
				return nil, errors.New("mkfs: tar member data read twice")
			}
			used = true
			return io.NopCloser(s.tr), nil
		}
	}
	return e, nil
}

// Close does nothing: the reader belongs to the caller.
func (s *TarSource) Close() error { return nil }

// tarEntry maps one header.
func tarEntry(h *tar.Header) (*Entry, error) {
	p, err := CleanPath(h.Name)
	if err != nil {
		return nil, err
	}
	if h.Uid < 0 || h.Gid < 0 || int64(h.Uid) > 1<<32-1 || int64(h.Gid) > 1<<32-1 {
		return nil, inputErr(p, "owner %d:%d out of range", h.Uid, h.Gid)
	}
	e := &Entry{Path: p, Perm: uint32(h.Mode) & 0o7777, UID: uint32(h.Uid), GID: uint32(h.Gid),
		Mtime: h.ModTime, Atime: h.AccessTime}
	if e.Atime.IsZero() {
		e.Atime = e.Mtime
	}
	switch h.Typeflag {
	case tar.TypeReg, tar.TypeRegA, tar.TypeGNUSparse:
		e.Kind, e.Size = KindFile, h.Size
		if e.Size < 0 {
			return nil, inputErr(p, "negative size %d", e.Size)
		}
	case tar.TypeDir:
		e.Kind = KindDir
	case tar.TypeSymlink:
		e.Kind, e.Target = KindSymlink, h.Linkname
	case tar.TypeLink:
		e.Kind = KindHardlink
		if e.LinkOf, err = CleanPath(h.Linkname); err != nil {
			return nil, inputErr(p, "hardlink target: %v", err)
		}
		return &Entry{Path: p, Kind: KindHardlink, LinkOf: e.LinkOf}, nil
	case tar.TypeChar, tar.TypeBlock:
		e.Kind = KindCharDev
		if h.Typeflag == tar.TypeBlock {
			e.Kind = KindBlockDev
		}
		if h.Devmajor < 0 || h.Devminor < 0 || h.Devmajor > 1<<12-1 || h.Devminor > 1<<20-1 {
			return nil, inputErr(p, "device number %d:%d out of range", h.Devmajor, h.Devminor)
		}
		e.DevMajor, e.DevMinor = uint32(h.Devmajor), uint32(h.Devminor)
	case tar.TypeFifo:
		e.Kind = KindFifo
	default:
		return nil, inputErr(p, "tar member type %q not supported", string(h.Typeflag))
	}
	e.Xattrs = paxXattrs(h.PAXRecords)
	return e, nil
}

// paxXattrs collects the "SCHILY.xattr." records, sorted by name.
func paxXattrs(recs map[string]string) []Xattr {
	const prefix = "SCHILY.xattr."
	var xs []Xattr
	for k, v := range recs {
		if name, ok := strings.CutPrefix(k, prefix); ok {
			xs = append(xs, Xattr{Name: name, Value: []byte(v)})
		}
	}
	sort.Slice(xs, func(i, j int) bool { return xs[i].Name < xs[j].Name })
	return xs
}
