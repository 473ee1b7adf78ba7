package cli

import (
	"errors"
	"io/fs"
	"os"
	"strings"
	"syscall"
)

// How errors read on standard error: one "gobtrfs CMD: " prefix, then the
// path and the reason in coreutils' words ("d: No such file or
// directory"), without the operation names and repeated paths that
// wrapped errors collect on their way up.

// messages splits err into the lines to print: every error an
// errors.Join holds becomes its own line.
func messages(err error) []string {
	if errs, ok := joined(err); ok {
		var out []string
		for _, e := range errs {
			out = append(out, messages(e)...)
		}
		return out
	}
	return []string{describe(err)}
}

// joined returns the errors err joins when it is an errors.Join: its
// text is theirs, one a line. Other errors with several causes (a data
// error that is also corruption) are one message.
func joined(err error) ([]error, bool) {
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return nil, false
	}
	var errs []error
	var texts []string
	for _, e := range j.Unwrap() {
		if e != nil {
			errs = append(errs, e)
			texts = append(texts, e.Error())
		}
	}
	return errs, strings.Join(texts, "\n") == err.Error()
}

// describe renders one error: a path error as "PATH: Reason" (the
// operation is the command's, named by the prefix already), an errno as
// strerror words.
func describe(err error) string {
	var he hostError
	if errors.As(err, &he) && he.error != err {
		err = he.error
	}
	var ue usageError
	if errors.As(err, &ue) && ue.err != err {
		err = ue.err
	}
	var pe *fs.PathError
	if errors.As(err, &pe) && err == error(pe) {
		return pe.Path + ": " + reason(pe.Path, pe.Err)
	}
	var le *os.LinkError
	if errors.As(err, &le) && err == error(le) {
		if le.Op == "symlink" {
			// Old is the link's text, not a path: name the link.
			return le.New + ": " + reason(le.New, le.Err)
		}
		return le.Old + " -> " + le.New + ": " + reason("", le.Err)
	}
	if _, ok := err.(syscall.Errno); ok || errors.Is(err, syscall.ENOSPC) {
		return reason("", err)
	}
	return err.Error()
}

// reason is the text of err for a message about path: errnos and the io/fs
// sentinels in strerror's words, a nested error about the same path
// without the path again.
func reason(path string, err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) && err == error(pe) && pe.Path == path {
		return reason(path, pe.Err)
	}
	switch {
	case err == fs.ErrNotExist:
		err = syscall.ENOENT
	case err == fs.ErrExist:
		err = syscall.EEXIST
	case err == fs.ErrPermission:
		err = syscall.EACCES
	case err == fs.ErrInvalid:
		err = syscall.EINVAL
	}
	if en, ok := err.(syscall.Errno); ok {
		return capitalize(en.Error())
	}
	if errors.Is(err, syscall.ENOSPC) {
		// The allocator's chain (which tree, which block group, which
		// profile) means nothing to the user: the image is full.
		return capitalize(syscall.ENOSPC.Error())
	}
	// Wrapping that names the path again ("x.img: x.img: ...").
	msg := err.Error()
	for path != "" && strings.HasPrefix(msg, path+": ") {
		msg = msg[len(path)+2:]
	}
	return msg
}

// capitalize makes Go's lower-case errno texts read as strerror's.
func capitalize(s string) string {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// hostError marks an error about a host path, so that inImage leaves its
// path as it is.
type hostError struct{ error }

func (e hostError) Unwrap() error { return e.error }

// hostErr marks err (if any) as being about host paths.
func hostErr(err error) error {
	if err == nil {
		return nil
	}
	return hostError{err}
}

// inImage rewrites the path of a path error about the session's image as
// the user names it (IMAGE:/PATH at the top level, /PATH in a script):
// the library names paths the io/fs way ("etc/passwd"). Errors marked as
// hostError and absolute paths (the host's) are left alone.
func (s *session) inImage(err error) error {
	var he hostError
	if err == nil || errors.As(err, &he) {
		return err
	}
	if s.fsys == nil {
		return err
	}
	inside := func(p string) bool { return !strings.HasPrefix(p, "/") && !strings.Contains(p, ":") }
	var pe *fs.PathError
	if errors.As(err, &pe) && inside(pe.Path) {
		pe.Path = s.show(cleanFSPath(pe.Path))
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		if le.Op != "symlink" && inside(le.Old) {
			le.Old = s.show(cleanFSPath(le.Old))
		}
		if inside(le.New) {
			le.New = s.show(cleanFSPath(le.New))
		}
	}
	return err
}

// operandErr names the operand arg (IMAGE:PATH as typed) in an error the
// library reported with its own path.
func operandErr(arg string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return &fs.PathError{Op: pe.Op, Path: arg, Err: pe.Err}
	}
	return &fs.PathError{Op: "open", Path: arg, Err: err}
}
