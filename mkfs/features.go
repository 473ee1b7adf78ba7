package mkfs

import (
	"fmt"
	"strings"
)

// Feature is one -O name Format knows.
type Feature struct {
	Name, Description string
}

// FeatureList returns the -O names Format can turn on or off, in the
// order and words of `mkfs.btrfs -O list-all`.
func FeatureList() []Feature {
	return []Feature{
		{"extref", "increased hardlink limit per file to 65536 (default)"},
		{"skinny-metadata", "reduced-size metadata extent refs (default, always on)"},
		{"no-holes", "no explicit hole extents for files (default)"},
		{"fst", "free-space-tree alias"},
		{"free-space-tree", "free space tree, improved space tracking (space_cache=v2) (default)"},
	}
}

// offOnly are mkfs.btrfs 6.19 features Format cannot make: asking for
// them is an error, turning them off ("^name") is what Format does
// anyway. block-group-tree is on by default in mkfs.btrfs 6.19 and off
// here (the 6.2 layout; see docs/design/0012-mkfs-drop-in.md).
var offOnly = map[string]bool{
	"block-group-tree": true, "bgt": true, "mixed-bg": true, "quota": true, "squota": true,
	"raid56": true, "raid1c34": true, "zoned": true, "extent-tree-v2": true, "raid-stripe-tree": true,
}

// parseFeatures applies -O names to the mkfs.btrfs 6.2 defaults.
func parseFeatures(names []string) (features, error) {
	f := features{extref: true, skinny: true, noHoles: true, fst: true}
	for _, n := range names {
		for _, one := range strings.Split(n, ",") {
			one = strings.ToLower(strings.TrimSpace(one))
			if one == "" {
				continue
			}
			on := !strings.HasPrefix(one, "^")
			name := strings.TrimPrefix(one, "^")
			switch name {
			case "extref":
				f.extref = on
			case "no-holes":
				f.noHoles = on
			case "free-space-tree", "fst":
				f.fst = on
			case "skinny-metadata":
				if !on {
					return f, fmt.Errorf("%w: feature %q (tree blocks are always skinny)", ErrUnsupported, one)
				}
			default:
				if offOnly[name] && !on {
					continue
				}
				if offOnly[name] {
					return f, fmt.Errorf("%w: feature %q (not supported by gobtrfs yet)", ErrUnsupported, one)
				}
				return f, fmt.Errorf("%w: feature %q", ErrUnsupported, one)
			}
		}
	}
	return f, nil
}
