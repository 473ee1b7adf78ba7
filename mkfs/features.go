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
		{"skinny-metadata", "reduced-size metadata extent refs (default)"},
		{"no-holes", "no explicit hole extents for files (default)"},
		{"fst", "free-space-tree alias"},
		{"free-space-tree", "free space tree, improved space tracking (space_cache=v2) (default)"},
		{"bgt", "block-group-tree alias"},
		{"block-group-tree", "block group tree, more efficient block group tracking to reduce mount time (default)"},
		{"mixed-bg", "mixed data and metadata block groups"},
	}
}

// offOnly are mkfs.btrfs 6.19 features Format cannot make: asking for
// them is an error, turning them off ("^name") is what Format does
// anyway.
var offOnly = map[string]bool{
	"quota": true, "squota": true,
	"raid56": true, "raid1c34": true, "zoned": true, "extent-tree-v2": true, "raid-stripe-tree": true,
}

// bgtDropped is mkfs.btrfs 6.19's warning when the block-group tree is
// turned off for want of the features the kernel requires beside it.
const bgtDropped = "disabling block-group-tree feature due to missing no-holes and free-space-tree features"

// parseFeatures applies -O names to the default feature set, mkfs.btrfs
// 6.19's: extref, skinny-metadata, no-holes, free-space-tree and
// block-group-tree (docs/design/0012-mkfs-drop-in.md). Names are
// matched ignoring case, and "_" stands for "-" (block_group_tree), as
// the kernel spells the features in sysfs. The block-group tree needs
// no-holes and the free-space tree (the kernel refuses to mount it
// otherwise): without them it is turned off, with a warning, as
// mkfs.btrfs 6.19 does, also when asked for.
func parseFeatures(names []string) (features, []string, error) {
	f := features{extref: true, skinny: true, noHoles: true, fst: true, bgt: true}
	for _, n := range names {
		for _, one := range strings.Split(n, ",") {
			one = strings.ToLower(strings.TrimSpace(one))
			if one == "" {
				continue
			}
			on := !strings.HasPrefix(one, "^")
			name := strings.ReplaceAll(strings.TrimPrefix(one, "^"), "_", "-")
			switch name {
			case "extref":
				f.extref = on
			case "no-holes":
				f.noHoles = on
			case "free-space-tree", "fst":
				f.fst = on
			case "block-group-tree", "bgt":
				f.bgt = on
			case "skinny-metadata":
				f.skinny = on
			case "mixed-bg":
				f.mixed = on
			default:
				if offOnly[name] && !on {
					continue
				}
				if offOnly[name] {
					return f, nil, fmt.Errorf("%w: feature %q (not supported by gobtrfs yet)", ErrUnsupported, one)
				}
				return f, nil, fmt.Errorf("%w: feature %q", ErrUnsupported, one)
			}
		}
	}
	var warnings []string
	if f.bgt && (!f.fst || !f.noHoles) {
		f.bgt = false
		warnings = append(warnings, bgtDropped)
	}
	return f, warnings, nil
}

// FeatureWarnings returns what mkfs.btrfs 6.19 would warn about the -O
// names (a feature turned off because another it needs is off), for a
// command line to print; Format applies the same rules silently. Names
// Format refuses give no warning here: Format reports them.
func FeatureWarnings(names []string) []string {
	_, w, _ := parseFeatures(names)
	return w
}
