package disk

import (
	"errors"
	"fmt"
)

// ErrCorrupt marks every error caused by bytes on disk that break the format.
// Callers test errors.Is(err, ErrCorrupt); the public package re-exports it.
var ErrCorrupt = errors.New("corrupt filesystem")

// CorruptError describes one piece of corruption and where it was found.
// Zero-valued location fields are omitted from the message.
type CorruptError struct {
	// Logical is the logical address of the block concerned, if known.
	Logical LogicalAddr
	// Physical is the device byte offset concerned, if known (superblocks).
	Physical PhysicalAddr
	// Tree is the owning tree id, if known.
	Tree ObjectID
	// Key is the item key concerned, if any.
	Key *Key
	// What says what is wrong, in lower case without a final period.
	What string
	// Err is an underlying cause, if any.
	Err error
}

// Error implements error.
func (e *CorruptError) Error() string {
	s := e.What
	loc := ""
	if e.Tree != 0 {
		loc += fmt.Sprintf(" tree %s", e.Tree.TreeName())
	}
	if e.Logical != 0 {
		loc += fmt.Sprintf(" block %d", uint64(e.Logical))
	}
	if e.Physical != 0 {
		loc += fmt.Sprintf(" device offset %d", uint64(e.Physical))
	}
	if e.Key != nil {
		loc += " key " + e.Key.String()
	}
	if loc != "" {
		s = "corrupt" + loc + ": " + s
	} else {
		s = "corrupt: " + s
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Is reports that every CorruptError is an ErrCorrupt.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

// Unwrap returns the underlying cause.
func (e *CorruptError) Unwrap() error { return e.Err }

// Corruptf returns a *CorruptError with a formatted description and no location;
// callers that know the location fill the fields or wrap it.
func Corruptf(format string, args ...any) *CorruptError {
	return &CorruptError{What: fmt.Sprintf(format, args...)}
}

// shortErr reports a buffer too short to hold a structure.
func shortErr(what string, have, want int) error {
	return Corruptf("%s: %d bytes, need %d", what, have, want)
}
