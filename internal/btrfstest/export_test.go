package btrfstest

// SkipOrFail exposes the GOBTRFS_INTEROP rule to the external tests.
var SkipOrFail = skipOrFail
