package btrfs

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"
	"testing"

	"github.com/gobtrfs/btrfs/internal/alloc"
	"github.com/gobtrfs/btrfs/internal/txn"
)

// TestErrorSentinelsMatch covers the out-of-space and unsupported errors
// the layers below make, which no small image reaches in a unit test.
func TestErrorSentinelsMatch(t *testing.T) {
	for _, err := range []error{alloc.ErrNoSpace, fmt.Errorf("%w: sys_chunk_array full", alloc.ErrNoSpace),
		syscall.ENOSPC, &wrapped{syscall.ENOSPC}} {
		if !errors.Is(err, ErrNoSpace) {
			t.Errorf("%v does not match ErrNoSpace", err)
		}
	}
	err := fmt.Errorf("%w: log tree present (replay it by mounting first)", txn.ErrUnsupported)
	if !errors.Is(err, ErrUnsupported) || !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("%v does not match ErrUnsupported and errors.ErrUnsupported", err)
	}
	if got, want := err.Error(), "not supported: log tree present (replay it by mounting first)"; got != want {
		t.Errorf("message %q, want %q (the feature, no layer name)", got, want)
	}
	if !errors.Is(errReadOnly, syscall.EROFS) || !errors.Is(errReadOnly, fs.ErrPermission) {
		t.Errorf("errReadOnly does not match EROFS and fs.ErrPermission")
	}
}

type wrapped struct{ err error }

func (w *wrapped) Error() string { return "change: " + w.err.Error() }
func (w *wrapped) Unwrap() error { return w.err }
