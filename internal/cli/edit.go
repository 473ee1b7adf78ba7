package cli

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gobtrfs/btrfs"
)

// word is one editing command (mkdir, chmod, ...). Its run function is the
// only implementation: the top-level command (paths as IMAGE:PATH, one
// transaction per call) and `gobtrfs edit` (paths inside the image, many
// lines per transaction) both call it with a session that resolves paths.
type word struct {
	name     string
	synopsis string // after the name; PATH operands written without IMAGE:
	short    string
	long     string
	flags    []flagDef
	readOnly bool // needs no writable open (getfattr)
	// dashOperand, if set, tells operands that start with "-" from
	// options (chmod's modes).
	dashOperand func(string) bool
	// hHelp makes -h mean --help, for words whose model has it so
	// (util-linux fallocate); coreutils' commands either reject -h or give
	// it another meaning.
	hHelp bool
	run   func(s *session, a *wordArgs) error
}

// editWords lists every word in the order help shows them.
var editWords = []*word{
	&mkdirWord, &rmdirWord, &rmWord, &mvWord, &lnWord, &mknodWord,
	&chmodWord, &chownWord, &touchWord, &setfattrWord, &getfattrWord,
	&cpWord, &writeWord, &truncateWord, &fallocateWord,
	&chattrWord, &lsattrWord, &getfaclWord, &setfaclWord,
}

func findWord(name string) *word {
	for _, w := range editWords {
		if w.name == name {
			return w
		}
	}
	return nil
}

// session is what a word runs against: the open filesystem and the way its
// operands name paths. A top-level command opens the image when the first
// path operand names it; a script session has the filesystem open already.
type session struct {
	fsys     *btrfs.FS
	out      io.Writer
	script   bool         // operands are paths inside the image
	image    string       // top level: the image the first path named
	devices  []string     // top level: the other devices (--device)
	readOnly bool         // top level: open read-only
	compress string       // top level: --compress
	warn     func(string) // top level: where warnings of the open go
}

// path resolves a path operand to an io/fs path in the session's
// filesystem. At the top level the operand is IMAGE:PATH; the first one
// opens the image and every other must name the same image.
func (s *session) path(arg string) (string, error) {
	if s.script {
		return cleanFSPath(arg), nil
	}
	image, p := splitImagePath(arg)
	if image == arg {
		return "", usagef("%s: name the path as IMAGE:PATH", arg)
	}
	if s.fsys == nil {
		o := &btrfs.Options{Devices: s.devices}
		if err := setCompress(o, s.compress); err != nil {
			return "", err
		}
		fsys, err := openImage(image, o, !s.readOnly, s.warn)
		if err != nil {
			return "", hostErr(err)
		}
		s.fsys = fsys
		s.image = image
		return p, nil
	}
	if filepath.Clean(image) != filepath.Clean(s.image) {
		return "", usagef("%s: every path of one command must be in the same image (%s)", arg, s.image)
	}
	return p, nil
}

// paths resolves every operand with path.
func (s *session) paths(args []string) ([]string, error) {
	out := make([]string, len(args))
	for i, a := range args {
		p, err := s.path(a)
		if err != nil {
			return nil, err
		}
		out[i] = p
	}
	return out, nil
}

// wordHelp is the help text of a word: its description and its options.
func wordHelp(w *word, pathNote string) string {
	var b strings.Builder
	b.WriteString(w.long)
	if pathNote != "" {
		b.WriteString("\n\n" + pathNote)
	}
	if len(w.flags) > 0 {
		b.WriteString("\n\nOptions:")
		for _, d := range w.flags {
			fmt.Fprintf(&b, "\n  %-24s %s", d.spelling(), d.help)
		}
	}
	return b.String()
}

// deviceFlag names the other devices of a multi-device filesystem for the
// top-level editing commands (long form only: -d means other things here).
var deviceFlag = flagDef{name: "device", long: "device", arg: true,
	help: "another device of a multi-device filesystem (repeatable)"}

// wordCommand makes the top-level command of a word: operands are
// IMAGE:PATH, all in one image, and every change goes into one
// transaction, committed only when everything succeeded.
func wordCommand(w *word) *cobra.Command {
	flags := append(append([]flagDef(nil), w.flags...), deviceFlag)
	if compressWords[w.name] {
		flags = append(flags, compressFlag)
	}
	cmd := &cobra.Command{
		Use:   w.name + " " + strings.ReplaceAll(w.synopsis, "PATH", "IMAGE:PATH"),
		Short: w.short,
		Long: wordHelp(&word{long: w.long, flags: flags},
			"Paths are IMAGE:PATH, all in the same image. All changes are one transaction:\n"+
				"on any error nothing is committed. See also `gobtrfs edit`."),
		// The word parses its own options, so that the top-level command
		// and a script line read exactly the same syntax.
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, a := range args {
				if a == "--" {
					break
				}
				if a == "--help" || (a == "-h" && w.hHelp) {
					return cmd.Help()
				}
			}
			pa, err := parseArgs(flags, args, w.dashOperand)
			if err != nil {
				return err
			}
			s := &session{out: cmd.OutOrStdout(), devices: pa.vals["device"], readOnly: w.readOnly, warn: warner(cmd)}
			if c := pa.vals["compress"]; len(c) > 0 {
				s.compress = c[len(c)-1]
			}
			err = s.inImage(w.run(s, pa))
			if s.fsys == nil {
				return err
			}
			if err == nil && !w.readOnly {
				err = s.fsys.Commit()
			} else if err != nil && !w.readOnly {
				// A failing argument drops the whole command's changes.
				err = errors.Join(err, s.fsys.Rollback())
			}
			return errors.Join(err, s.fsys.Close())
		},
	}
	// Only --help: -h means --no-dereference to getfattr and setfattr.
	cmd.Flags().Bool("help", false, "help for "+w.name)
	return cmd
}

func newEditCommand() *cobra.Command {
	var ff fsFlags
	var script, compress string
	cmd := &cobra.Command{
		Use:   "edit IMAGE [-f SCRIPT]",
		Short: "Apply a script of editing commands to a filesystem image",
		Long:  editHelp(),
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			in := cmd.InOrStdin()
			if script != "" && script != "-" {
				f, err := os.Open(script)
				if err != nil {
					return err
				}
				defer f.Close()
				in = f
			}
			o := &btrfs.Options{Devices: ff.devices, SuperFallback: ff.superFallback}
			if err := setCompress(o, compress); err != nil {
				return err
			}
			fsys, err := openImage(args[0], o, true, warner(cmd))
			if err != nil {
				return err
			}
			err = runScript(fsys, in, cmd.OutOrStdout())
			if err != nil {
				// A failing line drops what came after the last commit
				// (Close would commit it).
				err = errors.Join(err, fsys.Rollback())
			}
			return errors.Join(err, fsys.Close())
		},
	}
	ff.register(cmd)
	cmd.Flags().StringVarP(&script, "file", "f", "-", "read the script from SCRIPT (- for standard input)")
	cmd.Flags().StringVar(&compress, "compress", "", compressFlag.help)
	return cmd
}

// maxScriptLine is the longest script line accepted.
const maxScriptLine = 16 << 20

// runScript applies the script read from r to fsys: one word per line,
// a commit at every `commit` line and at the end. The first failing line
// stops it; what ran since the last commit is left uncommitted for the
// caller's Close to drop.
func runScript(fsys *btrfs.FS, r io.Reader, out io.Writer) error {
	s := &session{fsys: fsys, out: out, script: true}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxScriptLine)
	n := 0
	for sc.Scan() {
		n++
		if err := runLine(s, sc.Text()); err != nil {
			// Not wrapped: a bad line is a failed script (exit 1), even
			// when the line itself misused a word.
			return fmt.Errorf("line %d: %v", n, err)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("line %d: %v", n+1, err)
	}
	return fsys.Commit()
}

// runLine runs one script line.
func runLine(s *session, line string) error {
	words, err := splitLine(line)
	if err != nil || len(words) == 0 {
		return err
	}
	if words[0] == "commit" {
		if len(words) > 1 {
			return errors.New("commit takes no arguments")
		}
		return s.fsys.Commit()
	}
	w := findWord(words[0])
	if w == nil {
		return fmt.Errorf("unknown word %q (see gobtrfs edit --help)", words[0])
	}
	pa, err := parseArgs(w.flags, words[1:], w.dashOperand)
	if err != nil {
		return fmt.Errorf("%s: %v", w.name, err)
	}
	if err = s.inImage(w.run(s, pa)); err != nil {
		// The word's own messages leave naming the word to the caller.
		return fmt.Errorf("%s: %s", w.name, describe(err))
	}
	return nil
}

// editHelp is the long help of `gobtrfs edit`, listing the words.
func editHelp() string {
	var b strings.Builder
	b.WriteString(`Read editing commands, one per line, from SCRIPT or standard input and apply
them to the filesystem in IMAGE in one open. Changes are committed at every
"commit" line and at the end. The first failing line stops the script with
its line number and exit status 1; changes after the last commit are dropped.

Lines are split like a shell would, without expansions: 'single quotes',
"double quotes" (backslash escapes " \ $ and ` + "`" + `), backslash escapes, # comments,
blank lines. Paths are inside the image ("/etc" and "etc" are the same).

Words (each also exists as a top-level command taking IMAGE:PATH):
  commit                 commit the changes so far`)
	for _, w := range editWords {
		fmt.Fprintf(&b, "\n  %s %s\n      %s", w.name, w.synopsis, w.short)
	}
	return b.String()
}

// The top-level editing commands, one constructor each for the list in
// commands.go.

func newMkdirCommand() *cobra.Command    { return wordCommand(&mkdirWord) }
func newRmdirCommand() *cobra.Command    { return wordCommand(&rmdirWord) }
func newRmCommand() *cobra.Command       { return wordCommand(&rmWord) }
func newMvCommand() *cobra.Command       { return wordCommand(&mvWord) }
func newLnCommand() *cobra.Command       { return wordCommand(&lnWord) }
func newMknodCommand() *cobra.Command    { return wordCommand(&mknodWord) }
func newChmodCommand() *cobra.Command    { return wordCommand(&chmodWord) }
func newChownCommand() *cobra.Command    { return wordCommand(&chownWord) }
func newTouchCommand() *cobra.Command    { return wordCommand(&touchWord) }
func newSetfattrCommand() *cobra.Command { return wordCommand(&setfattrWord) }
func newGetfattrCommand() *cobra.Command { return wordCommand(&getfattrWord) }
func newChattrCommand() *cobra.Command   { return wordCommand(&chattrWord) }
func newLsattrCommand() *cobra.Command   { return wordCommand(&lsattrWord) }
func newGetfaclCommand() *cobra.Command  { return wordCommand(&getfaclWord) }
func newSetfaclCommand() *cobra.Command  { return wordCommand(&setfaclWord) }
