package cli

import (
	"fmt"
	"strings"
)

// Output of the -v options, worded as coreutils words it.

// quoteName quotes a name as coreutils' messages do ('name'): a single
// quote inside is written '\” so that the text can be pasted into a
// shell.
func quoteName(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// show names the image path p in messages: IMAGE:/p at the top level, /p
// in a script, where every path is in the one image.
func (s *session) show(p string) string {
	if s.script {
		return displayPath(p)
	}
	return s.image + ":" + displayPath(p)
}

// verbosef prints one -v line to the session's output.
func (s *session) verbosef(format string, args ...any) {
	fmt.Fprintf(s.out, format+"\n", args...)
}
