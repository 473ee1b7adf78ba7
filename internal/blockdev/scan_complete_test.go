package blockdev

import (
	"errors"
	"testing"

	"github.com/gobtrfs/btrfs/internal/disk"
)

// A devid that chunks use but no device provides is a missing device
// while the superblock counts more devices than are present, and damage
// when all that it counts are there.
func TestCheckComplete(t *testing.T) {
	set := func(numDevices uint64, ids ...disk.DevID) *Set {
		s := &Set{Super: &disk.Superblock{NumDevices: numDevices}, Members: map[disk.DevID]*Member{}}
		for _, id := range ids {
			s.Members[id] = &Member{}
		}
		return s
	}
	if err := set(1, 1).CheckComplete([]disk.DevID{1}); err != nil {
		t.Errorf("complete set: %v", err)
	}
	if err := set(2, 1).CheckComplete([]disk.DevID{1, 2}); err != nil {
		t.Errorf("one of two devices given: %v, want nil (a missing device, not damage)", err)
	}
	err := set(1, 7).CheckComplete([]disk.DevID{1})
	if !errors.Is(err, disk.ErrCorrupt) {
		t.Errorf("one device of one, chunks name another devid: %v, want ErrCorrupt", err)
	}
	t.Log(err)
}
