package alloc

import (
	"slices"
	"testing"
)

func TestExtentsGaps(t *testing.T) {
	var e Extents
	e.Insert(10, 20)
	e.Insert(30, 40)
	for _, tc := range []struct {
		start, end uint64
		want       []Range
	}{
		{0, 5, []Range{{0, 5}}},
		{0, 50, []Range{{0, 10}, {20, 30}, {40, 50}}},
		{12, 18, nil},
		{15, 35, []Range{{20, 30}}},
		{20, 30, []Range{{20, 30}}},
		{40, 45, []Range{{40, 45}}},
		{5, 5, nil},
	} {
		if got := e.Gaps(tc.start, tc.end); !slices.Equal(got, tc.want) {
			t.Errorf("Gaps(%d, %d) = %v, want %v", tc.start, tc.end, got, tc.want)
		}
	}
}
