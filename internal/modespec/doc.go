// Package modespec parses and applies chmod(1) modes: octal ("755",
// "04755") and symbolic ("u+x,go-w", "a=rX", "g=u", "+t"). It is the one
// mode parser of the project: the edit shell's chmod, mkdir -m and mknod
// -m, and mkfs --chmod (which adds rsync-style D/F prefixes around it) all
// use it, so a mode means the same everywhere.
//
// Meaning follows chmod(1) with one deliberate difference: no umask
// applies, so a clause without u, g, o or a acts on all classes ("+w" is
// "a+w"). As chmod(1) does, a directory keeps its set-id bits unless the
// mode names them: an octal mode of up to four digits only sets them
// ("00755" clears them), and "=" leaves them unless it lists s.
//
// Invariants: Apply only ever returns bits within 0o7777 and depends only
// on its arguments. The package works on plain Linux permission bits
// (uint32) and imports nothing of this module, so any layer may use it.
// It must never touch a filesystem.
package modespec
