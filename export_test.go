package btrfs

// OpenWritableWith exposes openWritableWith to the external tests: the
// power-loss tests open an image with a recording device under the
// transaction side (write_crash_test.go).
var OpenWritableWith = openWritableWith
