package cli

import (
	"runtime/debug"
	"strings"
)

// version is what gobtrfs --version prints after the name: the module
// version the binary was built as ("(devel)" from a work tree), the
// commit and "-dirty" for uncommitted changes when the build knows them,
// and the Go version.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var rev string
	dirty := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	parts := []string{v}
	if rev != "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if dirty {
			rev += "-dirty"
		}
		parts = append(parts, rev)
	}
	parts = append(parts, bi.GoVersion)
	return strings.Join(parts, " ")
}
