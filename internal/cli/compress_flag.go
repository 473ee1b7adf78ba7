package cli

import (
	"strconv"
	"strings"

	"github.com/gobtrfs/btrfs"
)

// compressFlag is --compress ALG[:LEVEL] of the commands that write file
// data (cp, write, edit): the kernel's compress= mount option for what
// they write. Files and directories whose compression property or flags
// say otherwise keep to them, as with the kernel.
var compressFlag = flagDef{name: "compress", long: "compress", arg: true, meta: "ALG[:LEVEL]",
	help: "compress the data written: zlib, lzo or zstd (as the compress= mount option)"}

// compressWords are the words whose top-level command takes --compress.
var compressWords = map[string]bool{"cp": true, "write": true}

// setCompress parses an ALG[:LEVEL] value into o; "" leaves o alone.
func setCompress(o *btrfs.Options, v string) error {
	if v == "" {
		return nil
	}
	alg, lvl, _ := strings.Cut(v, ":")
	alg = strings.ToLower(alg)
	switch alg {
	case "zlib", "lzo", "zstd":
	case "no", "none":
		alg = ""
	default:
		return usagef("--compress %q: one of zlib, lzo, zstd (with :LEVEL for zlib and zstd)", v)
	}
	o.Compress = alg
	if lvl != "" {
		n, err := strconv.Atoi(lvl)
		if err != nil || alg == "lzo" || alg == "zlib" && (n < 1 || n > 9) || alg == "zstd" && (n < -15 || n > 15 || n == 0) {
			return usagef("--compress %q: bad level", v)
		}
		o.CompressLevel = n
	}
	return nil
}
